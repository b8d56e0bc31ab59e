"""Pulling an image on one host, with progress a waiting user can read.

Why: a big image takes minutes to pull, and until now the workload sat in
Initializing with nothing to say.  The runtime's own words while it pulls (podman
writes ``Copying blob sha256:...`` as each layer starts when its output is not a
terminal) become a short line the agent sends to its supervisor, which the server
shows as the workload's ``Pulling`` reason and events (``Pulled`` once it is done,
with how long it took and the image's size), as Kubernetes' kubelet does.

Standard library only: the agent imports this module (for image pods).
"""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from collections.abc import Callable

from ringleader.launch.container_runtime import is_docker
from ringleader.launch.image_pin import inspect_image

#: The pulls this process has going (``cancel_all`` ends them when its agent closes).
_GOING: set[subprocess.Popen[bytes]] = set()
_GOING_LOCK = threading.Lock()

#: A line at least this often while a pull goes on, so a slow layer still shows time passing.
PROGRESS_EVERY_S = 5.0
#: ``progress(text, done)``: one line on this host's pull; ``done`` once it has ended well.
Progress = Callable[[str, bool], None]


def pull(
    runtime: str,
    image: str,
    flags: list[str],
    limit: float,
    progress: Progress | None = None,
) -> str:
    """Pull ``image`` with ``runtime`` (``flags``: the registry's, registry_pull: the
    pull's own for podman, docker's global ``--config`` before its verb), within
    ``limit`` seconds; "" or why it failed (the registry's own last words, or the
    timeout).  ``progress`` hears each layer as it starts and the time every
    ``PROGRESS_EVERY_S``; a process that outlives ``limit`` is killed and reaped."""
    tell = progress or (lambda _text, _done: None)
    start = time.monotonic()
    tell(f"pulling image {image}", False)
    # docker says its progress on stdout, podman on stderr: one stream either way.
    docker = is_docker(runtime)
    verb = [*flags, "pull"] if docker else ["pull", *flags]
    proc = subprocess.Popen(
        [runtime, *verb, "--", image],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if docker else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if docker else subprocess.PIPE,
    )
    with _GOING_LOCK:
        _GOING.add(proc)
    try:
        lines = _read_until_exit(proc, start + limit, image, start, tell)
    finally:
        with _GOING_LOCK:
            _GOING.discard(proc)
    if lines is None:
        return (
            f"pulling image {image} did not finish in {limit:g} s "
            "(ringleader server --image-pull-timeout)"
        )
    if proc.returncode != 0:
        last = (lines or [f"exit {proc.returncode}"])[-1]
        return f"cannot pull image {image}: {last.removeprefix('Error: ')}"
    took = time.monotonic() - start
    size = image_size(runtime, image)
    tell(f"pulled image {image} in {took:.1f} s" + (f" ({size})" if size else ""), True)
    return ""


def _read_until_exit(
    proc: subprocess.Popen[bytes], deadline: float, image: str, start: float, tell: Progress
) -> list[str] | None:
    """The pull's output lines once it has exited, telling each layer as it starts;
    None if ``deadline`` passed first (the pull is then killed and reaped)."""
    stream = proc.stderr or proc.stdout
    assert stream is not None
    fd, pending, lines, layers = stream.fileno(), b"", [], 0
    told = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                proc.kill()
                proc.wait()
                return None
            ready, _, _ = select.select([fd], [], [], min(deadline - now, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                pending += chunk
                *whole, pending = pending.split(b"\n")
                for raw in whole:
                    line = raw.decode("utf-8", "replace").strip()
                    if not line:
                        continue
                    lines.append(line)
                    digest = _layer_started(line)
                    if digest is not None:
                        layers += 1
                        tell(_doing(image, layers, digest[:12], start), False)
                        told = time.monotonic()
            if time.monotonic() - told >= PROGRESS_EVERY_S:
                tell(_doing(image, layers, "", start), False)
                told = time.monotonic()
        if pending.strip():
            lines.append(pending.decode("utf-8", "replace").strip())
        proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None
    finally:
        stream.close()
    return lines


def _layer_started(line: str) -> str | None:
    """The layer a pull's line says has started (podman: ``Copying blob sha256:D``,
    docker: ``D: Pulling fs layer``), or None."""
    if line.startswith("Copying blob "):
        return line.removeprefix("Copying blob ").removeprefix("sha256:")
    if line.endswith(": Pulling fs layer"):
        return line.removesuffix(": Pulling fs layer")
    return None


def _doing(image: str, layers: int, digest: str, start: float) -> str:
    took = time.monotonic() - start
    if not layers:
        return f"pulling image {image}: {took:.0f} s"
    layer = f"layer {layers}" + (f" ({digest})" if digest else "")
    return f"pulling image {image}: {layer}, {took:.0f} s"


def image_size(runtime: str, image: str) -> str:
    """The image's size here in MB, as ``inspect`` says ("" when it cannot say)."""
    try:
        size = int((inspect_image(runtime, image, "{{.Size}}") or "").splitlines()[0])
    except (ValueError, IndexError):
        return ""
    return f"{size / 1e6:.0f} MB" if size >= 1e6 else f"{size} bytes"


def cancel_all() -> None:
    """Kill and reap every pull of this process: its agent is closing (the supervisor
    gone silent, or the agent stopped), and a pull must not outlive it."""
    with _GOING_LOCK:
        going = list(_GOING)
    for proc in going:
        if proc.poll() is None:
            proc.kill()
        proc.wait()

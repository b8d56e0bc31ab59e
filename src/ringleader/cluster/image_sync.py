"""``ringleader image sync IMAGE HOST...``: the same image on every host without a
registry: ``podman save`` here piped into ``podman load`` there (``docker load`` on a
host with docker and no podman), only where the host's image differs.

Why: seed 004's first step wants "uniform images" across the cluster.  The
registry (server/registry.py) is one way; a cluster with no registry, or a host
that cannot reach it, still needs each node to hold exactly this machine's image.
An image is the same where its ID (the digest of its config, which ``save`` and
``load`` keep) is the same, so a host that already holds it is left alone and a
host with a stale image under the same name gets this one.

Invariants: ssh as everywhere (batch mode, host keys checked, the remote command
quoted, a failure classified with its fix); the image travels over ssh's own
pipe, never a file on either side; each host's outcome is said, and one host
failing does not stop the others.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from ringleader.launch.image_pin import image_id
from ringleader.launch.ssh import SSHOptions, classify_failure, host_argv, ssh_argv

#: The remote shell's runtime, as a node's probe picks it: podman, else docker.
PICK_RUNTIME = (
    "rt=$(command -v podman || command -v docker) || "
    '{ echo "no podman or docker" >&2; exit 127; }; '
)
INSPECT_TIMEOUT_S = 60.0
LOAD_TIMEOUT_S = 1800.0  # a GB over a slow link


@dataclass(frozen=True)
class Synced:
    """One host's outcome: ``state`` is ``same`` (it held this image), ``copied`` or
    ``failed`` (``detail`` says why, with a fix where ssh's failure names one)."""

    host: str
    state: str
    detail: str = ""
    seconds: float = 0.0


def _ask(host: str, command: str, ssh: SSHOptions) -> tuple[str, str]:
    """(what ``command`` (run with ``"$rt"``: the host's runtime) printed on ``host``,
    why it could not be asked or ""): ssh's failures classified with their fix, a
    host without podman or docker named."""
    command = PICK_RUNTIME + command
    try:
        done = subprocess.run(
            host_argv(host, command, ssh), stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=INSPECT_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "", f"no answer in {INSPECT_TIMEOUT_S:g} s"
    if done.returncode == 255:
        stage, detail, fix = classify_failure(host, done.stderr)
        return "", f"{stage}: {detail}" + (f" (fix: {fix})" if fix else "")
    if "no podman or docker" in done.stderr:
        return "", "the host has no podman or docker (apt install podman)"
    return done.stdout, ""


def remote_id(host: str, image: str, ssh: SSHOptions) -> tuple[str, str]:
    """(the host's ID of ``image`` or "", why it could not be asked or "")."""
    found, problem = _ask(
        host, f"\"$rt\" image inspect --format '{{{{.Id}}}}' -- {shlex.quote(image)} 2>/dev/null",
        ssh,
    )  # fmt: skip
    return found.strip().removeprefix("sha256:"), problem  # docker's IDs have it


def remote_ids(host: str, ssh: SSHOptions) -> tuple[set[str], str]:
    """(the ID of every image the host's runtime holds, why it could not be asked or
    ""): one ssh for all of a node's images (``image ls``)."""
    found, problem = _ask(host, '"$rt" images --quiet --no-trunc 2>/dev/null', ssh)
    if problem:
        return set(), problem
    return {line.strip().removeprefix("sha256:") for line in found.split() if line.strip()}, ""


def _copy(podman: str, host: str, image: str, ssh: SSHOptions) -> str:
    """``podman save | ssh host podman load`` (or ``docker load``); "" or why it failed."""
    save = subprocess.Popen(
        [podman, "save", "--format", "docker-archive", "--", image],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert save.stdout is not None
    try:
        load = subprocess.run(
            ssh_argv(host, PICK_RUNTIME + '"$rt" load --quiet', ssh), stdin=save.stdout,
            capture_output=True, text=True, timeout=LOAD_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        save.kill()
        save.wait()
        return f"the copy did not finish in {LOAD_TIMEOUT_S:g} s"
    finally:
        save.stdout.close()
    saved = save.wait()
    if saved != 0:
        err = save.stderr.read().decode(errors="replace") if save.stderr else ""
        return f"podman save failed: {(err.strip().splitlines() or [f'exit {saved}'])[-1]}"
    if load.returncode == 255:
        stage, detail, _fix = classify_failure(host, load.stderr)
        return f"{stage}: {detail}"
    if load.returncode != 0:
        last = (load.stderr.strip().splitlines() or [f"exit {load.returncode}"])[-1]
        return f"load failed there: {last.removeprefix('Error: ')}"
    return ""


def sync(
    podman: str,
    image: str,
    hosts: list[str],
    ssh: SSHOptions,
    said: Callable[[Synced], None] = lambda _s: None,
) -> list[Synced]:
    """Make every host hold this machine's ``image`` (the caller checked it is here);
    each outcome goes to ``said`` as it is known."""
    wanted = image_id(podman, image)
    outcomes = []
    for host in hosts:
        started = time.monotonic()
        there, problem = remote_id(host, image, ssh)
        if problem:
            outcome = Synced(host, "failed", problem)
        elif there == wanted:
            outcome = Synced(host, "same", wanted[:12])
        else:
            problem = _copy(podman, host, image, ssh)
            if not problem:
                there, problem = remote_id(host, image, ssh)
                if not problem and there != wanted:
                    problem = f"after the copy the host has {there[:12] or 'none'}"
            elapsed = time.monotonic() - started
            outcome = (
                Synced(host, "failed", problem, elapsed)
                if problem
                else Synced(host, "copied", wanted[:12], elapsed)
            )
        said(outcome)
        outcomes.append(outcome)
    return outcomes

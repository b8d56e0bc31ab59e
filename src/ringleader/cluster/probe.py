"""What ``doctor`` runs on each host: fed to the host's interpreter on stdin.

Self-contained (standard library only, no ringleader import): it must run
where ringleader is missing or differs, which is what it helps find.

    python - facts WORKDIR MASTER_ADDRESS [INTERFACE] [--skip=DIR]...
                                                        -> one JSON line of facts
    python - listen ADDRESS                             -> prints a port, accepts until EOF
    python - connect ADDRESS:PORT...                    -> one JSON line: target -> error|null
    python - node                                       -> one JSON line: the node's resources
    python - heartbeat SECONDS [N]                      -> the node line, then a beat every
                                                           SECONDS (the node line again every
                                                           N beats) until the reader goes away

The code fingerprint is a SHA-256 over the working directory's files (git's
list of tracked and unignored files when it is a git checkout, else every
file but caches and virtual environments): relative path and content.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

#: How long ``podman version`` may take, and what a node says when it took longer.
RUNTIME_TIMEOUT_S = 20.0
RUNTIME_BUSY = "no answer in time (busy?)"
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".ruff_cache"}
#: What ``fingerprint`` reads at most: a project's code is far less.  Past it (doctor run
#: from /tmp or a home directory, a data set beside the code) the code is not compared,
#: and doctor says why, instead of reading gigabytes until its probe times out.
FINGERPRINT_MAX_FILES = 20_000
FINGERPRINT_MAX_BYTES = 1 << 30
TOO_BIG = "too-big"


def _outside(names: list[str], skip: tuple[str, ...]) -> list[str]:
    """``names`` less those under a ``skip`` directory (relative to the working one)."""
    prefixes = tuple(d.strip("/") + "/" for d in skip if d.strip("/"))
    return [n for n in names if not n.startswith(prefixes)] if prefixes else names


def files(workdir: str, limit: int | None = None, skip: tuple[str, ...] = ()) -> list[str]:
    """What ``sync`` copies: git's tracked and unignored regular files, or every
    regular file but caches; both without what ``.ringleaderignore`` names or the
    ``skip`` directories hold (this machine's ringleader home, when it lies inside:
    doctor passes it, as sync excludes it).  With ``limit``, a walk
    stops once it has found more than that many (the caller only needs to know)."""
    ignore = os.path.join(workdir, ".ringleaderignore")
    patterns = []
    if os.path.isfile(ignore):
        with open(ignore) as handle:
            patterns = [ln.strip() for ln in handle if ln.strip() and not ln.startswith("#")]
    # A checkout's .git is a directory; a worktree's or a submodule's, a file.
    if os.path.exists(os.path.join(workdir, ".git")) and shutil.which("git"):
        argv = ["git", "-C", workdir, "ls-files", "-co", "--exclude-standard", "-z"]
        done = subprocess.run(
            [*argv, *(["--exclude-from", ignore] if patterns else [])],
            capture_output=True,
            timeout=60,
        )
        if done.returncode == 0:
            names = [n for n in done.stdout.decode().split("\0") if n]
            names = [n for n in names if os.path.isfile(os.path.join(workdir, n))]
            return sorted(_outside(names, skip))
    found = []
    skipped = {os.path.normpath(os.path.join(workdir, d)) for d in skip}
    for root, dirs, names in os.walk(workdir):
        # Pruned, not filtered after: a skipped home's run logs never count to ``limit``.
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIP_DIRS and os.path.normpath(os.path.join(root, d)) not in skipped
        )
        for name in names:
            relative = os.path.relpath(os.path.join(root, name), workdir)
            if name.endswith((".pyc", ".pyo")) or ignored(relative, patterns):
                continue
            if os.path.isfile(os.path.join(root, name)):  # not a FIFO, socket or device
                found.append(relative)
        if limit is not None and len(found) > limit:
            break
    return sorted(found)


def ignored(relative: str, patterns: list[str]) -> bool:
    """A rough reading of rsync/git patterns: ``data/`` a directory, ``*.log`` a name."""
    parts = relative.split(os.sep)
    for pattern in patterns:
        bare = pattern.strip("/")
        if pattern.endswith("/") and any(fnmatch.fnmatch(p, bare) for p in parts[:-1]):
            return True
        if fnmatch.fnmatch(parts[-1], bare) or fnmatch.fnmatch(relative, bare):
            return True
    return False


def fingerprint(workdir: str, skip: tuple[str, ...] = ()) -> tuple[str, int]:
    """A digest of the code's names and contents, and how many files; ``TOO_BIG``
    (with the count found so far) past ``FINGERPRINT_MAX_FILES`` or ``_BYTES``."""
    digest = hashlib.sha256()
    names = files(workdir, limit=FINGERPRINT_MAX_FILES, skip=skip)
    if len(names) > FINGERPRINT_MAX_FILES:
        return TOO_BIG, len(names)
    size = 0
    for name in names:
        try:
            size += os.stat(os.path.join(workdir, name)).st_size
        except OSError:
            continue
        if size > FINGERPRINT_MAX_BYTES:
            return TOO_BIG, len(names)
    for name in names:
        digest.update(name.encode() + b"\0")
        try:
            with open(os.path.join(workdir, name), "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        except OSError:
            digest.update(b"<unreadable>")
        digest.update(b"\0")
    return digest.hexdigest()[:16], len(names)


def version(package: str) -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as get

        return get(package)
    except PackageNotFoundError:
        return None


def container_runtime() -> tuple[str, str]:
    """("podman 4.3.1" (or docker's), "") for what runs a node's image pods; ("", why)
    when one is installed but broken (its ``version`` fails); ("", "") for none.  The
    same order and test as ``launch/container_runtime.detect``, which this must not import:
    podman first unless the head prefers docker (``RINGLEADER_CONTAINER_RUNTIME``, set
    on the probe's command line by the server, ``ssh_nodes.probe_command``)."""
    broken = ""
    order = ["podman", "docker"]
    if os.environ.get("RINGLEADER_CONTAINER_RUNTIME") == "docker":
        order.reverse()
    for name in order:
        path = shutil.which(name)
        if path is None:
            continue
        try:
            done = subprocess.run(
                [path, "version", "--format", "{{.Client.Version}}"],
                capture_output=True,
                text=True,
                timeout=RUNTIME_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            broken = broken or f"{name} version: {RUNTIME_BUSY}"
            continue
        except OSError as exc:
            broken = broken or f"{name} version: {exc}"
            continue
        if done.returncode == 0 and done.stdout.strip():
            return f"{name} {done.stdout.strip()}", ""
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        broken = broken or f"{name} version: {last[:200]}"
    return "", broken


def addresses() -> dict[str, str]:
    """IPv4 address -> interface name (from ``ip -o -4 addr``; it may live in sbin,
    outside a non-root login's PATH)."""
    out: dict[str, str] = {}
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    ip = shutil.which("ip", path=path)
    if not ip:
        return out
    try:
        text = subprocess.run(
            [ip, "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "inet":
            out[parts[3].split("/")[0]] = parts[1]
    return out


def resolve(master: str) -> tuple[str | None, str | None]:
    """(the IPv4 address ``master`` names here, None) or (None, why it does not)."""
    try:
        return socket.gethostbyname(master), None
    except OSError as exc:
        return None, exc.strerror or str(exc)


def route(master: str, interface: str | None) -> tuple[str | None, str | None, str | None]:
    """(interface, address, error): what this host uses toward ``master`` (or the
    address of ``interface``); error is why there is no route."""
    known = addresses()
    if interface:
        return interface, next((a for a, i in known.items() if i == interface), None), None
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((master, 9))  # no packet is sent: the kernel picks the route
            address = sock.getsockname()[0]
    except OSError as exc:
        return None, None, exc.strerror or str(exc)
    return known.get(address), address, None


def self_reach(addresses: list[str], timeout_s: float = 1.0) -> dict[str, str | None]:
    """Can this host open a TCP connection to itself at each address?  Address ->
    error or None.  Fails when the loopback interface is down: the kernel routes a
    host's own addresses through it, so a rank would not reach rank 0's store on
    its own host, nor ranks beside it."""
    reached: dict[str, str | None] = {}
    for address in addresses:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
                server.bind((address, 0))
                server.listen(1)
                port = server.getsockname()[1]
                with socket.create_connection((address, port), timeout=timeout_s):
                    reached[address] = None
        except OSError as exc:
            reached[address] = (
                "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
            )
    return reached


def nvidia_smi(fields: str, units: bool = True) -> list[str] | None:
    """``nvidia-smi --query-gpu=FIELDS`` as CSV lines; [] without nvidia-smi, None
    when it failed."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    form = "--format=csv,noheader" + ("" if units else ",nounits")
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={fields}", form], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [line.strip() for line in out.splitlines() if line.strip()]


def gpus() -> list[str]:
    """What doctor shows: one ``name, memory, driver`` line per device."""
    lines = nvidia_smi("name,memory.total,driver_version")
    return ["nvidia-smi failed"] if lines is None else lines


def facts(
    workdir: str, master: str, interface: str | None, skip: tuple[str, ...] = ()
) -> dict[str, object]:
    present = os.path.isdir(workdir)
    code, count = fingerprint(workdir, skip) if present else (None, 0)
    disk = shutil.disk_usage(workdir if present else os.path.expanduser("~"))
    name, address, route_error = route(master, interface)
    master_address, master_error = resolve(master)
    return {
        "python": sys.executable,
        "python_version": ".".join(map(str, sys.version_info[:3])),
        "torch": version("torch"),
        "ringleader": version("ringleader"),
        "workdir": present,
        "code": code,
        "files": count,
        "free_bytes": disk.free,
        "gpus": gpus(),
        "time": time.time(),
        "interface": name,
        "address": address,
        "route_error": route_error,
        "master_address": master_address,
        "master_error": master_error,
        "self_reach": self_reach(["127.0.0.1", *([address] if address else [])]),
    }


def gpu_devices() -> list[dict[str, object]]:
    """``[{"index", "model", "memoryBytes"}]`` from nvidia-smi; [] without it."""
    devices: list[dict[str, object]] = []
    for line in nvidia_smi("index,name,memory.total", units=False) or []:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            mib = float(parts[2]) if parts[2].replace(".", "", 1).isdigit() else 0.0
            memory = int(mib * 2**20)
            devices.append({"index": int(parts[0]), "model": parts[1], "memoryBytes": memory})
    return devices


def memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    return int(pages * size)


def node(known_runtime: tuple[str, str] | None = None) -> dict[str, object]:
    """What a node offers the scheduler, and what it runs, for ``nodes add``.
    ``known_runtime``: a heartbeat's last answer, kept when the runtime is too busy
    to answer now (a slow answer is not a broken runtime)."""
    import platform

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    runtime, runtime_error = container_runtime()
    if known_runtime and not runtime and runtime_error.endswith(RUNTIME_BUSY):
        runtime, runtime_error = known_runtime
    return {
        "hostname": socket.gethostname(),
        "cpu_cores": cores or 1,
        "memory_bytes": memory_bytes(),
        "gpus": gpu_devices(),
        "os": platform.platform(),
        "python": sys.executable,
        "python_version": ".".join(map(str, sys.version_info[:3])),
        "torch": version("torch"),
        "ringleader": version("ringleader"),
        "containerRuntime": runtime,
        "containerRuntimeError": runtime_error,
    }


def heartbeat(every_s: float, reprobe: int) -> None:
    """The node line, then ``beat`` lines until the pipe breaks (the watcher left).

    Beats never wait for a probe: the node line again (every ``reprobe`` beats) is
    found by a thread of its own, since its ``podman version`` can take seconds on a
    host busy pulling an image, and a late beat makes the node NotReady (its gangs
    fail).  A runtime that does not answer in time keeps the last answer it gave."""
    lock = threading.Lock()
    probing = threading.Event()
    last_runtime: list[tuple[str, str]] = []

    def say(text: str) -> None:
        with lock:
            print(text, flush=True)

    def node_line() -> None:
        try:
            found = node(last_runtime[0] if last_runtime else None)
            if found["containerRuntime"]:
                last_runtime[:] = [(str(found["containerRuntime"]), "")]
            say(json.dumps(found))
        except (BrokenPipeError, OSError):
            return  # the watcher left; the next beat ends the loop
        finally:
            probing.clear()

    try:
        say(json.dumps(node()))
        beats = 1
        while True:
            time.sleep(every_s)
            if beats % reprobe == 0 and not probing.is_set():
                probing.set()
                threading.Thread(target=node_line, daemon=True).start()
            else:
                say("beat")
            beats += 1
    except (BrokenPipeError, OSError):
        return


def listen(address: str) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind((address, 0))
    server.listen(64)
    print(server.getsockname()[1], flush=True)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()  # until the caller closes the connection


def connect(targets: list[str]) -> dict[str, str | None]:
    results: dict[str, str | None] = {}
    for target in targets:
        host, _, port = target.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=3):
                results[target] = None
        except OSError as exc:
            results[target] = exc.strerror or str(exc)
    return results


def main(argv: list[str]) -> int:
    mode, args = argv[0], argv[1:]
    skip = tuple(a[len("--skip=") :] for a in args if a.startswith("--skip="))
    args = [a for a in args if not a.startswith("--skip=")]
    if mode == "facts":
        print(json.dumps(facts(args[0], args[1], args[2] if len(args) > 2 else None, skip)))
    elif mode == "listen":
        listen(args[0])
    elif mode == "connect":
        print(json.dumps(connect(args)))
    elif mode == "node":
        print(json.dumps(node()))
    elif mode == "heartbeat":
        heartbeat(float(args[0]), int(args[1]) if len(args) > 1 else 30)
    else:
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What ``mpirun`` starts for each rank: env mapping, whole lines, exit report.

Why a wrapper: mpirun tags output per write, not per line, so a rank that
writes a line in pieces gets split and mixed with others; and mpirun only
reports the first failure in prose.  This wrapper runs the real command as
its child, writes every line of it in one ``write`` (a line over
``LINE_CAP - TAG_ROOM`` bytes in marked pieces, as the agent does), and ends with one
``RINGLEADER-RANK-EXIT {json}`` line on stderr that the supervisor reads.

Invariants: the child dies with the wrapper (PDEATHSIG on Linux, and
SIGTERM/SIGINT are forwarded to it); the wrapper exits with the child's
code.  Every line it writes, its own included, is one ``write`` ending in a
newline, so mpirun never glues its tag to the end of one.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time

from ringleader.launch.lines import LINE_CAP, forward_lines
from ringleader.launch.plan import RANK_ENV
from ringleader.launch.rank_process import pin
from ringleader.runtime.env import CPU_AFFINITY

EXIT_MARKER = "RINGLEADER-RANK-EXIT "
#: mpirun puts its tag (``[1,R]<stdout>:``) before each line this wrapper writes,
#: and the agent reading mpirun cuts at LINE_CAP: pieces here leave room for it.
TAG_ROOM = 256
_OMPI_TO_TORCH = {
    "OMPI_COMM_WORLD_RANK": ("RANK", "RINGLEADER_RANK", "ROLE_RANK"),
    "OMPI_COMM_WORLD_SIZE": ("WORLD_SIZE", "RINGLEADER_WORLD_SIZE", "ROLE_WORLD_SIZE"),
    "OMPI_COMM_WORLD_LOCAL_RANK": ("LOCAL_RANK", "RINGLEADER_LOCAL_RANK"),
    "OMPI_COMM_WORLD_LOCAL_SIZE": ("LOCAL_WORLD_SIZE", "RINGLEADER_LOCAL_WORLD_SIZE"),
    "OMPI_COMM_WORLD_NODE_RANK": ("NODE_RANK", "GROUP_RANK", "RINGLEADER_NODE_RANK"),
}


def rank_environment(environ: dict[str, str]) -> dict[str, str]:
    """torchrun's names derived from OpenMPI's; the user's own values win.

    Pure: the same environ (this wrapper's, as mpirun started it) gives the
    same rank environment, so ``exec`` into the pod can show exactly what the
    rank got (``server.services.exec``) from the wrapper's own environ.
    """
    env = dict(environ)
    with contextlib.suppress(ValueError, TypeError, AttributeError):  # absent or not a map
        own = json.loads(environ.get(RANK_ENV) or "{}").get(environ.get("OMPI_COMM_WORLD_RANK"))
        env.update({str(k): str(v) for k, v in (own or {}).items()})
    env.pop(RANK_ENV, None)
    for source, targets in _OMPI_TO_TORCH.items():
        if source in environ:
            for target in targets:
                env.setdefault(target, environ[source])
    rank = env.get("RANK", "0")
    if "RINGLEADER_ERROR_DIR" in environ:
        path = f"{environ['RINGLEADER_ERROR_DIR']}/rank-{rank}.error.json"
        env.setdefault("TORCHELASTIC_ERROR_FILE", path)
        env.setdefault("RINGLEADER_ERROR_FILE", path)
    local = max(1, int(env.get("LOCAL_WORLD_SIZE", "1")))
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // local)))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def exec_environment(environ: dict[str, str]) -> dict[str, str]:
    """The rank's environment, given the environ of a process found for its pod.

    Under mpirun that process is this wrapper (started first, with OpenMPI's
    ``OMPI_COMM_WORLD_RANK`` but not yet ``RANK``): its rank got
    ``rank_environment`` of it.  Any other environ is a rank's already.
    """
    if "OMPI_COMM_WORLD_RANK" in environ and "RANK" not in environ:
        return rank_environment(environ)
    return environ


def cannot_start(command: str, exc: OSError) -> str:
    """Why ``command`` did not start, in a shell's words where it has them."""
    if isinstance(exc, FileNotFoundError) and "/" not in command:
        return f"cannot start {command!r}: command not found (not on PATH)"
    return f"cannot start {command!r}: {exc.strerror or exc}"


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _write_all(fd: int, data: bytes) -> None:
    """One line in as few writes as the pipe takes (a signal may cut one short)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("usage: python -m ringleader.launch.mpi_rank -- COMMAND...", file=sys.stderr)
        return 2
    env = rank_environment(dict(os.environ))
    if "RINGLEADER_ERROR_DIR" in os.environ:
        with contextlib.suppress(OSError):
            os.makedirs(os.environ["RINGLEADER_ERROR_DIR"], exist_ok=True)
    pin(os.getpid(), env.get(CPU_AFFINITY, ""))  # its binding, over mpirun's own; inherited
    try:
        child = subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
    except OSError as exc:
        reason = cannot_start(argv[0], exc)
        code = 127 if isinstance(exc, FileNotFoundError) else 126  # as a shell says it
        _write_all(2, f"{reason}\n".encode())
        report = {"code": code, "signal": None, "t": time.time(), "reason": reason}
        _write_all(2, (EXIT_MARKER + json.dumps(report) + "\n").encode())
        return code
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda s, _f: child.send_signal(s))
    lock = threading.Lock()

    def writer(fd: int):
        def emit(line: str) -> None:
            with lock:
                _write_all(fd, (line + "\n").encode())

        return emit

    readers = [
        threading.Thread(
            target=forward_lines, args=(stream, writer(fd), LINE_CAP - TAG_ROOM), daemon=True
        )
        for stream, fd in ((child.stdout, 1), (child.stderr, 2))
    ]
    for thread in readers:
        thread.start()
    code = child.wait()
    ended = time.time()
    for thread in readers:
        thread.join(timeout=1.0)
    signum = -code if code < 0 else None
    exit_code = 128 + signum if signum else code
    error = None
    if exit_code != 0 and env.get("RINGLEADER_ERROR_FILE"):
        from ringleader.runtime.errorfile import read_error_file

        with contextlib.suppress(Exception):
            error = read_error_file(env["RINGLEADER_ERROR_FILE"])
    report = {"code": exit_code, "signal": signum, "t": ended, "error": error}
    with lock:
        _write_all(2, (EXIT_MARKER + json.dumps(report) + "\n").encode())
    return exit_code


if __name__ == "__main__":
    sys.exit(main())

"""The demo's own control plane: started in the background, found again, stopped.

Kept apart from ``examples/demo.py`` (the job it submits, its logs and the printed
summary) because this is process handling with a life of its own: a ``ringleader
server`` with the demo's home and port, recorded in a pid file so that a second
run reuses it and ``make demo-stop`` (``demo.py --stop``) ends it; a pid file's
process is trusted only while it is that home's server (``/proc``), and a server
is ours only while it takes that home's key.  Stopping it first suspends the
workloads it still runs, whose processes are detached from it and would
outlive it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from ringleader.launch.procs import process_argv

PID_FILE = "server.pid"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
FINAL_PHASES = ("Completed", "Failed", "Stopped")


# ----- processes ------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    """A live process (a zombie is not)."""
    return process_argv(pid) is not None


def _is_our_server(pid: int, home: Path) -> bool:
    """``pid`` is a live ``ringleader server`` whose RINGLEADER_HOME is ``home``."""
    if not _alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return not Path("/proc").is_dir()  # no /proc to check: trust the pid file
    return b"server" in cmdline and f"RINGLEADER_HOME={home}".encode() in environ


def server_pid(home: Path) -> int | None:
    """The pid of this home's running demo server, from its pid file."""
    try:
        pid = int((home / PID_FILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if _is_our_server(pid, home) else None


def stop_workloads(url: str, home: Path) -> list[str]:
    """Suspend this server's unfinished workloads (after a Ctrl-C) and wait for them to stop."""
    from ringleader.client import Client
    from ringleader.errors import RingleaderError

    creds = credentials(home) or {}
    c = Client(url, creds["clientId"], creds["clientSecret"])
    done = (*FINAL_PHASES, "Deleted")
    active = [w for w in c.list_workloads(limit=500).workloads if w.actual_phase not in done]
    for w in active:
        with contextlib.suppress(RingleaderError):
            c.action(w.workload_id, "suspend")
    deadline = time.monotonic() + STOP_TIMEOUT_S + 15
    for w in active:
        while time.monotonic() < deadline:
            try:
                if c.workload(w.workload_id).actual_phase in done:
                    break
            except RingleaderError:
                break
            time.sleep(0.1)
    return [w.name for w in active]


def stop_server(home: Path, *, workloads: bool = False) -> int | None:
    """SIGTERM this home's demo server, SIGKILL after a grace; its pid, or None if none ran.

    With ``workloads``, first suspend the workloads it still runs (their
    processes are detached from the server and would outlive it).
    """
    from ringleader.connection import read_config

    pid = server_pid(home)
    url = read_config(home).get("url")
    if pid is not None and workloads and url and _answers_to_us(url, home):
        stopped = stop_workloads(url, home)
        if stopped:
            print(f"suspended the unfinished workloads: {', '.join(stopped)}")
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    (home / PID_FILE).unlink(missing_ok=True)
    return pid


# ----- the server -----------------------------------------------------------------------
def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def credentials(home: Path) -> dict[str, str] | None:
    """The admin's key the server wrote into ``home``: None until it is there and readable."""
    try:
        return json.loads((home / "credentials.json").read_text())
    except (OSError, ValueError):
        return None


def _answers_to_us(url: str, home: Path) -> bool:
    """The server at ``url`` is up and takes this home's key (so it is ours, not another)."""
    from ringleader.client import Client
    from ringleader.connection import healthy
    from ringleader.errors import RingleaderError

    creds = credentials(home)
    if not creds or not healthy(url):
        return False
    try:
        Client(url, creds["clientId"], creds["clientSecret"]).token()
    except (RingleaderError, OSError, KeyError):
        return False
    return True


def ensure_server(
    home: Path,
    port: int,
    env: dict[str, str],
    ringleader: list[str],
    shown: Callable[[list[str]], str],
) -> tuple[str, int, bool]:
    """This home's server, started if needed: (url, pid, started).

    ``shown`` writes the server's command as the user would type it (the demo's
    own rendering, as for ``demo_image.ensure_image``)."""
    from ringleader.connection import read_config, write_config

    url = read_config(home).get("url")
    pid = server_pid(home)
    if pid is not None and url and _answers_to_us(url, home):
        return url, pid, False
    if pid is not None:  # running but not answering: start afresh
        stop_server(home)
    if port == 0 or not _port_free(port):
        if port:
            print(f"(port {port} is taken; using a free one)")
        port = _free_port()
    url = f"http://127.0.0.1:{port}"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    # A personal server for this demo: its workloads run as you (a shared server run
    # as root gives each user's workloads an account of their own: docs/security.md).
    command = [*ringleader, "server", "--port", str(port), "--run-as", "server"]
    print(f"$ {shown(command)} &   # state in {home}, log in {home / 'server.log'}")
    with open(home / "server.log", "ab") as log:
        proc = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # it outlives this demo, and Ctrl-C here
        )
    (home / PID_FILE).write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _answers_to_us(url, home):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            (home / PID_FILE).unlink(missing_ok=True)
            raise SystemExit(
                f"the server did not start (exit {proc.returncode}):\n"
                + _tail(home / "server.log", 20)
            )
        time.sleep(0.1)
    write_config({"url": url}, home)  # so `RINGLEADER_HOME=<home> ringleader ...` finds it
    return url, proc.pid, True


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""

"""With nothing configured, the first CLI command starts a local server in the background.

A fresh RINGLEADER_HOME, no RINGLEADER_URL and nothing on 127.0.0.1:8470: the
first ``submit-dist`` starts ``ringleader server`` detached (``Client.connect(
autostart=True)``), which writes a 0600 credentials file, creates the default
project, listens on 127.0.0.1 only and runs the workload; a second command
reuses that server.  The server's pid (in ``server.pid``) must be the owner
of the listening socket; the test ends it (and anything else carrying its
RINGLEADER_HOME) by pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.client import LOCAL_URL, Client
from ringleader.launch.procs import pids_with_marker
from ringleader.server.config import DEFAULT_PORT
from tests.conftest import require, wait_until

LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp{,6}


def _listeners(port: int) -> list[tuple[str, str]]:
    """(address, socket inode) of every socket listening on ``port``, IPv4 and IPv6."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if fields[3] == LISTEN and int(hex_port, 16) == port:
                found.append((_address(address), fields[9]))
    return found


def _address(hex_address: str) -> str:
    """/proc/net/tcp's little-endian hex address as text (IPv4 and IPv6)."""
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def _pids_with_socket(inode: str) -> list[int]:
    target = f"socket:[{inode}]"
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) == target for fd in (entry / "fd").iterdir()):
                pids.append(int(entry.name))
    return pids


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def _servers(home: Path) -> list[int]:
    """Live ``ringleader server`` processes whose RINGLEADER_HOME is ``home``."""
    pids = []
    for pid in pids_with_marker(f"RINGLEADER_HOME={home}"):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"ringleader" in argv and b"server" in argv:
                pids.append(pid)
    return pids


class Fresh:
    """A user with nothing configured: a new home, no RINGLEADER_* in the environment."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}
        self.env["RINGLEADER_HOME"] = str(home)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ringleader", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def sdk(self) -> Client:
        creds = json.loads((self.home / "credentials.json").read_text())
        return Client(LOCAL_URL, creds["clientId"], creds["clientSecret"])


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Fresh]:
    require(Path("/proc/net/tcp").is_file(), "Linux /proc (to find the server's socket)")
    require(
        not _listeners(DEFAULT_PORT),
        f"a free port {DEFAULT_PORT} (something already listens there; the autostart uses it)",
    )
    user = Fresh(tmp_path / "home")
    marker = f"RINGLEADER_HOME={user.home}"
    try:
        yield user
    finally:
        for pid in _servers(user.home):  # the server first, gracefully, by its pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not _servers(user.home), 20, "the autostarted server to exit")
        leftovers = pids_with_marker(marker)  # ranks or supervisors, only if something broke
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not pids_with_marker(marker), 15, "every process of the home to end")
        assert not leftovers, f"processes left behind: {leftovers}"


def test_first_command_starts_a_local_server(fresh: Fresh) -> None:
    assert not fresh.home.exists()
    first = fresh.cli(
        "submit-dist", "pytorch", "first", "--workers", "1", "--",
        "python", "-c", "print('hello from the first command')",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "'first' has been submitted successfully" in first.stdout

    # One server, detached (the command has returned), owning the listening socket.
    listeners = _listeners(DEFAULT_PORT)
    assert listeners, "nothing listens on the default port"
    assert {address for address, _ in listeners} == {"127.0.0.1"}, listeners  # loopback only
    owners = {pid for _, inode in listeners for pid in _pids_with_socket(inode)}
    servers = _servers(fresh.home)
    assert len(servers) == 1 and owners == set(servers), (owners, servers)
    pid = servers[0]
    assert (fresh.home / "server.pid").read_text().split() == [str(pid)]  # it says who it is
    assert json.loads((fresh.home / "server.json").read_text()) == {"pid": pid, "url": LOCAL_URL}

    # First start wrote an access key only its owner can read, and made the default project.
    credentials = fresh.home / "credentials.json"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert {"clientId", "clientSecret"} <= json.loads(credentials.read_text()).keys()
    sdk = fresh.sdk()
    assert "default" in {p.name for p in sdk.projects()}

    # The workload the first command submitted runs to Completed, in the default project.
    workload = wait_until(
        lambda: (w := sdk.find("first")).actual_phase in ("Completed", "Failed") and w,
        120,
        "the first workload to end",
    )
    assert workload.actual_phase == "Completed", workload.phase_message
    assert workload.project_name == "default"
    assert any("hello from the first command" in line for line in sdk.logs(workload.workload_id))

    # Later commands reuse that server: same pid, no second one started (or tried).
    projects = fresh.cli("project", "list")
    assert projects.returncode == 0, projects.stderr
    assert "default" in projects.stdout
    listing = fresh.cli("list")
    assert listing.returncode == 0, listing.stderr
    assert "first" in listing.stdout and "Completed" in listing.stdout
    assert _servers(fresh.home) == [pid]
    log = (fresh.home / "server.log").read_text()
    assert "address already in use" not in log.lower() and "errno 98" not in log.lower(), log


def test_the_listening_socket_is_tcp_so_responses_are_not_delayed() -> None:
    import socket as sockets

    from ringleader.cli.server import listening_socket

    sock = listening_socket("127.0.0.1", 0)
    try:
        assert sock.proto == sockets.IPPROTO_TCP  # asyncio then sets TCP_NODELAY per connection
    finally:
        sock.close()

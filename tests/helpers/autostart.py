"""A user's fresh home with no server, and the servers that came up for it (the
autostart and one-server tests; the ``fresh`` fixture is tests/server/conftest.py's)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.client import LOCAL_URL, Client
from ringleader.launch.procs import pids_with_marker
from ringleader.server.config import DEFAULT_PORT
from tests.conftest import require, wait_until


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

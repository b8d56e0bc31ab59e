"""One server per home, and the CLI finds it: real ``ringleader server`` processes.

A server locks its home and records its pid and URL there (``ringleader.home``);
a second server on the same home is refused, naming the first; ``ringleader
list`` in that home talks to the recorded server on whatever port it listens;
SIGTERM removes the record, and the stale record ``kill -9`` leaves behind is
ignored by the next command and replaced by the next server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.client import LOCAL_URL
from ringleader.connection import healthy
from ringleader.launch.procs import pids_with_marker
from tests.conftest import wait_until
from tests.helpers.autostart import Fresh, _servers
from tests.server.conftest import free_port

SERVER = ("--run-as", "server")


class Home(Fresh):
    """A user with nothing configured, who starts servers by hand in their home."""

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.procs: list[subprocess.Popen[bytes]] = []

    def start_server(self, port: int, *args: str) -> subprocess.Popen[bytes]:
        """``ringleader server --port PORT ARGS`` in the background, once it answers."""
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / f"server-{port}.log", "ab") as log:
            proc = subprocess.Popen(
                # --run-as server: the venv's interpreter is root's alone here
                [sys.executable, "-m", "ringleader", "server", "--port", str(port), *SERVER, *args],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self.procs.append(proc)
        wait_until(
            lambda: _answers(f"http://127.0.0.1:{port}") or proc.poll() is not None,
            60,
            "the server to answer",
        )
        assert proc.poll() is None, (self.home / f"server-{port}.log").read_text()
        return proc

    def record(self) -> dict[str, object] | None:
        try:
            return json.loads((self.home / "server.json").read_text())
        except OSError:
            return None


def _answers(url: str) -> bool:
    return healthy(url)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    user = Home(tmp_path / "home")
    try:
        yield user
    finally:
        for pid in _servers(user.home):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for proc in user.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)
        marker = f"RINGLEADER_HOME={user.home}"
        leftovers = pids_with_marker(marker)
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not pids_with_marker(marker), 15, "every process of the home to end")
        assert not leftovers, f"processes left behind: {leftovers}"


def test_a_second_server_on_the_same_home_is_refused_naming_the_first(home: Home) -> None:
    port, other = free_port(), free_port()
    first = home.start_server(port)
    url = f"http://127.0.0.1:{port}"
    assert home.record() == {"pid": first.pid, "url": url}
    before = {p.name: p.read_bytes() for p in home.home.iterdir() if p.name.startswith("server")}

    second = home.cli("server", "--port", str(other), *SERVER, timeout=60)

    assert second.returncode != 0
    assert f"pid {first.pid}" in second.stderr and url in second.stderr, second.stderr
    assert "Traceback" not in second.stderr
    # It changed nothing: the record is the first one's, and it never listened.
    after = {p.name: p.read_bytes() for p in home.home.iterdir() if p.name.startswith("server")}
    assert after == before
    assert not _answers(f"http://127.0.0.1:{other}")
    assert _servers(home.home) == [first.pid]


def test_list_after_server_on_a_port_talks_to_that_server(home: Home) -> None:
    port = free_port()
    server = home.start_server(port, "--simulate-nodes", "1x8gpu")

    listing = home.cli("list")
    nodes = home.cli("nodes", "list")

    assert listing.returncode == 0, listing.stderr
    assert nodes.returncode == 0 and "sim-0" in nodes.stdout, nodes.stdout + nodes.stderr
    who = home.cli("whoami")
    assert f"Server: http://127.0.0.1:{port}" in who.stdout, who.stdout + who.stderr
    assert _servers(home.home) == [server.pid]  # nothing new started (or tried)
    assert not (home.home / "server.log").exists()  # where an autostarted one would log


def test_sigterm_removes_the_record(home: Home) -> None:
    server = home.start_server(free_port())
    assert home.record() is not None

    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)

    assert server.returncode == -signal.SIGTERM  # it still ends as SIGTERM ends a process
    assert not (home.home / "server.json").exists()
    assert not (home.home / "server.pid").exists()
    port = free_port()  # and the home is free for the next one
    again = home.start_server(port)
    assert home.record() == {"pid": again.pid, "url": f"http://127.0.0.1:{port}"}


def test_kill_9_leaves_a_stale_record_that_the_next_server_replaces(home: Home) -> None:
    killed = home.start_server(free_port())
    killed.kill()
    killed.wait()
    assert home.record() == {"pid": killed.pid, "url": home.record()["url"]}  # stale, left

    port = free_port()
    server = home.start_server(port)  # the lock died with its holder: no refusal

    assert home.record() == {"pid": server.pid, "url": f"http://127.0.0.1:{port}"}
    who = home.cli("whoami")
    assert f"Server: http://127.0.0.1:{port}" in who.stdout, who.stdout + who.stderr


def test_kill_9_leaves_a_stale_record_that_the_next_command_ignores(
    fresh: Fresh,
) -> None:
    """With the recorded server dead, a command starts the home's server anew (on the
    default port, as for a new user) instead of calling the dead one's URL."""
    user = Home(fresh.home)
    killed = user.start_server(free_port())
    killed.kill()
    killed.wait()
    stale = user.record()
    assert stale is not None and stale["pid"] == killed.pid

    listing = fresh.cli("list")

    assert listing.returncode == 0, listing.stderr
    servers = _servers(fresh.home)
    assert len(servers) == 1 and servers[0] != killed.pid
    assert user.record() == {"pid": servers[0], "url": LOCAL_URL}

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
import stat
from pathlib import Path

from ringleader.client import LOCAL_URL
from ringleader.server.config import DEFAULT_PORT
from tests.conftest import wait_until
from tests.helpers.autostart import (
    Fresh,
    _address,  # noqa: F401
    _listeners,
    _servers,
)


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


def test_first_command_starts_a_local_server(fresh: Fresh) -> None:
    assert not fresh.home.exists()
    first = fresh.cli(
        "submit-dist", "pytorch", "first", "--workers", "1", "--",
        "python", "-c", "print('hello from the first command')",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "'first' has been submitted successfully" in first.stdout
    # It says that a server now runs in the background, where, and how to stop it.
    assert f"started a server for {fresh.home} at {LOCAL_URL}" in first.stderr, first.stderr
    assert "kill " in first.stderr and str(fresh.home / "server.log") in first.stderr

    # One server, detached (the command has returned), owning the listening socket.
    listeners = _listeners(DEFAULT_PORT)
    assert listeners, "nothing listens on the default port"
    assert {address for address, _ in listeners} == {"127.0.0.1"}, listeners  # loopback only

    # (A second, for an instant: the server forking the submitted workload's supervisor,
    # the child not yet exec'd, holds its socket and its command line; seen in a suite run.)
    def one_owner() -> tuple[set[int], list[int]] | None:
        owners = {pid for _, inode in listeners for pid in _pids_with_socket(inode)}
        servers = _servers(fresh.home)
        return (owners, servers) if len(servers) == 1 and owners == set(servers) else None

    _, servers = wait_until(one_owner, 30, "one server owning the socket")
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
    assert "started a server" not in listing.stderr  # said once, by the command that did

    # Another home meets that server on the default port: told why, and the ways out.
    other = Fresh(fresh.home.parent / "other-home")
    refused = other.cli("list")
    assert refused.returncode == 6, refused.stdout + refused.stderr
    assert "holds no credentials" in refused.stderr and "fix: " in refused.stderr
    assert "ringleader server --port 8471" in refused.stderr, refused.stderr
    assert not (other.home / "server.json").exists()  # it started nothing


def test_the_listening_socket_is_tcp_so_responses_are_not_delayed() -> None:
    import socket as sockets

    from ringleader.cli.server_process import listening_socket

    sock = listening_socket("127.0.0.1", 0)
    try:
        assert sock.proto == sockets.IPPROTO_TCP  # asyncio then sets TCP_NODELAY per connection
    finally:
        sock.close()

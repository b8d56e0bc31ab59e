"""Two real ``ringleader server`` processes on one PostgreSQL database, for the standby
tests and ``bench/standby.py``: start them, ask each its role, kill one with -9."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from ringleader.client import Client
from tests.conftest import wait_until
from tests.server.conftest import ServerProcess, stop_workloads

# The default: short enough for a test to see a take-over soon, long enough that a
# loaded machine starving the renewal thread for a second does not make the active lapse.
LEASE_TTL_S = "3"


def role(url: str) -> str | None:
    """What ``/healthz`` says the server at ``url`` is (None: no answer)."""
    try:
        return httpx.get(f"{url}/healthz", timeout=2.0).json().get("role")
    except (httpx.HTTPError, ValueError):
        return None


def start(home: Path, db_url: str, *extra: str) -> ServerProcess:
    server = ServerProcess(
        home, "--db", db_url, "--lease-ttl", LEASE_TTL_S, "--simulate-nodes", "1x1gpu", *extra
    )
    server.start()
    return server


@contextmanager
def pair(tmp_path: Path, db_url: str) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """``a`` (started first: active) and ``b`` (its standby), both answering; afterwards
    both killed and the workloads ``a`` started stopped."""
    servers: list[ServerProcess] = []
    try:
        a = start(tmp_path / "a", db_url)
        servers.append(a)
        wait_until(lambda: role(a.url) == "active", 60, "a active")
        b = start(tmp_path / "b", db_url)
        servers.append(b)
        wait_until(lambda: role(b.url) == "standby", 60, "b standby")
        yield a, b
    finally:
        for server in servers:
            server.kill()
        for server in servers:
            stop_workloads(server.home)


def client_for(home: Path, *urls: str) -> Client:
    """The real ringleader client, as the admin whose key ``home``'s server wrote,
    configured with every server's URL."""
    creds = json.loads((home / "credentials.json").read_text())
    return Client(",".join(urls), creds["clientId"], creds["clientSecret"], project="default")


def kill9(server: ServerProcess) -> None:
    """SIGKILL, as a host dying takes a server: nothing of it runs any more."""
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait()

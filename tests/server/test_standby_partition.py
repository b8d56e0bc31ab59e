"""A partition (issue 27, item 5): the active server, inside a test host's network
namespace, loses its link to the database; it stops acting on its own (writes refused,
it says it is a standby) and the other server takes over."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
from sqlalchemy.engine import make_url

from ringleader.cluster.testhosts import TestHostNetwork
from tests.conftest import wait_until
from tests.fixtures.postgres import pg_app_url, postgres_server  # noqa: F401
from tests.fixtures.testhosts import make_test_hosts_fixture  # noqa: F401 (the fixture)
from tests.server.conftest import stop_workloads
from tests.server.standby_pair import LEASE_TTL_S, role, start
from tests.server.tcp_relay import Relay

PORT = 8470  # inside the host's own network: nothing else listens there


def _inside(net: TestHostNetwork, path: str, method: str = "GET") -> tuple[int, dict[str, str]]:
    """A request to the server inside host 0, made from inside it (its loopback still
    works with the link down): the status and the JSON body."""
    code = (
        "import httpx, json, sys\n"
        f"r = httpx.request({method!r}, 'http://127.0.0.1:{PORT}{path}', json={{}}, timeout=5)\n"
        "print(json.dumps([r.status_code, r.json()]))"
    )
    done = subprocess.run(
        net.netns_argv(0, sys.executable, "-c", code),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        return 0, {}
    status, body = json.loads(done.stdout)
    return status, body


def test_the_active_cut_off_from_the_database_stops_acting_and_the_other_takes_over(
    tmp_path: Path,
    pg_app_url: str,  # noqa: F811
    make_test_hosts: Callable[..., TestHostNetwork],
) -> None:
    net = make_test_hosts(1)
    url = make_url(pg_app_url)
    relay = Relay(net.bridge_address, (url.host or "127.0.0.1", url.port or 5432))
    via_bridge = url.set(host=net.bridge_address, port=relay.port).render_as_string(False)
    address = net.address(0)
    a_url = f"http://{address}:{PORT}"
    home = tmp_path / "a"
    home.mkdir()
    log = open(home / "server-test.log", "ab")  # noqa: SIM115
    argv = [sys.executable, "-m", "ringleader", "server", "--host", "0.0.0.0",
            "--port", str(PORT), "--run-as", "server", "--db", via_bridge,
            "--lease-ttl", LEASE_TTL_S, "--simulate-nodes", "1x1gpu",
            "--advertise-url", a_url]  # fmt: skip
    env = {**os.environ, "RINGLEADER_HOME": str(home), "RINGLEADER_URL": a_url}
    a = subprocess.Popen(net.netns_argv(0, *argv), env=env, stdout=log, stderr=log,
                         start_new_session=True)  # fmt: skip
    b = None
    try:
        wait_until(lambda: role(a_url) == "active", 90, "a active (in its netns host)")
        b = start(tmp_path / "b", pg_app_url)
        wait_until(lambda: role(b.url) == "standby", 60, "b standby")
        assert httpx.get(f"{b.url}/healthz").json()["active"] == a_url

        net.take_down(0)  # the link of A's host: A and the database no longer meet

        wait_until(lambda: _inside(net, "/healthz")[1].get("role") == "standby", 60, "a steps down")
        status, body = _inside(net, "/api/v1/token", "POST")  # a write: refused, not queued
        assert status == 503 and "standby" in body["message"]
        wait_until(lambda: role(b.url) == "active", 60, "b takes over")
        assert "is a standby now" in (home / "server-test.log").read_text()

        net.bring_up(0)  # back on the network: A stays a standby, B holds the lease
        wait_until(lambda: role(a_url) is not None, 60, "a reachable again")
        assert role(a_url) == "standby" and role(b.url) == "active"
    finally:
        a.kill()
        a.wait()
        if b is not None:
            b.kill()
            stop_workloads(b.home)
        stop_workloads(home)
        relay.close()

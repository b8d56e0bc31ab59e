"""A standby adopts a gang running on SSH nodes (issue 27, item 5): the active server
is killed with -9 while the gang's agents run on two test hosts; the agents and ranks
never stop, and the gang finishes Completed under the new active.

Both servers share this machine here, so the new active reads the run directory the
old one's detached supervisor writes (the SSH backend's supervisor runs on the
server's host: docs/high-availability.md says what that means across hosts)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from tests.conftest import job_pids, wait_until
from tests.fixtures.postgres import pg_app_url, postgres_server  # noqa: F401
from tests.fixtures.testhosts import (  # noqa: F401 (the `make_test_hosts` fixture)
    TestHostNetwork,
    make_test_hosts_fixture,
)
from tests.helpers.ssh_cluster import Server, import_hosts
from tests.server.conftest import ServerProcess, stop_workloads
from tests.server.standby_pair import LEASE_TTL_S, client_for, kill9, role


def test_a_gang_on_ssh_nodes_survives_the_active_and_ends_under_the_standby(
    tmp_path: Path,
    pg_app_url: str,  # noqa: F811
    make_test_hosts: Callable[..., TestHostNetwork],
) -> None:
    net = make_test_hosts(2)
    args = ("--db", pg_app_url, "--lease-ttl", LEASE_TTL_S, "--no-local-node", "--placement", "spread",
            "--ssh-config", str(net.ssh_config))  # fmt: skip
    a, b = Server(tmp_path / "a", *args), ServerProcess(tmp_path / "b", *args)
    release = tmp_path / "release"
    try:
        a.start()
        wait_until(lambda: role(a.url) == "active", 60, "a active")
        import_hosts(a, net, tmp_path)
        b.start()
        wait_until(lambda: role(b.url) == "standby", 60, "b standby")
        # No short-lived children (a shell's sleeps): every process of the job stays.
        code = f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.2)"
        waits = shlex.join(["python", "-c", code])
        wid = a.submit("pair", tmp_path, waits, workers=1)
        a.wait_phase(wid, {"Running"})
        pods = a.http.get(f"/api/v1/workloads/{wid}/pods").json()["pods"]
        assert sorted(p["node"] for p in pods) == sorted(h.address for h in net.hosts)
        before = set(job_pids(f"rl-{wid}"))
        assert before

        kill9(a)
        wait_until(lambda: role(b.url) == "active", 60, "b active")
        assert before <= set(job_pids(f"rl-{wid}"))  # agents and ranks never stopped
        release.touch()
        client = client_for(a.home, b.url)
        wait_until(
            lambda: client.workload(wid).actual_phase == "Completed", 120, "Completed under b"
        )
    finally:
        a.kill()
        b.kill()
        stop_workloads(a.home)

"""SSH nodes through a real server: registration by probing over SSH, heartbeats,
workloads placed on the hosts, and a host going away mid-run.

Every host is a network namespace with its own sshd (``tests/fixtures/testhosts``);
the server reaches them with the test network's ssh config (host keys checked).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import RINGLEADER, job_pids, wait_until
from tests.fixtures.testhosts import (  # noqa: F401  (provides the `make_test_hosts` fixture)
    TestHostNetwork,
    make_test_hosts_fixture,
)
from tests.helpers.ssh_cluster import Server, hosts_json, import_hosts
from tests.server.conftest import stop_workloads

TRAIN = """\
import os, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, attempt = dist.get_rank(), int(os.path.exists("held"))  # the first run holds
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)  # every rank looked for "held" before rank 0 makes it
print(f"attempt {attempt} rank {rank}/{dist.get_world_size()} on {os.environ['RINGLEADER_NODE']}: "
      f"sum {t.item():g}", flush=True)
if rank == 0:
    open("held", "w").close()
if attempt == 0 and "--hold" in sys.argv:
    time.sleep(600)  # until the test takes a host away (or deletes the workload)
dist.destroy_process_group()
"""


@pytest.fixture
def cluster(make_test_hosts, tmp_path: Path) -> Iterator[tuple[Server, TestHostNetwork]]:
    net: TestHostNetwork = make_test_hosts(3)
    server = Server(
        tmp_path / "home",
        "--no-local-node",
        "--placement",
        "spread",
        "--ssh-config",
        str(net.ssh_config),
    )
    server.start()
    try:
        yield server, net
    finally:
        server.kill()
        stop_workloads(server.home)


def test_nodes_import_probes_each_host_and_names_the_one_that_fails(
    cluster: tuple[Server, TestHostNetwork], tmp_path: Path
) -> None:
    server, net = cluster
    dead = net.unreachable_address
    hosts = hosts_json(net, tmp_path / "hosts.json", dead)

    done = server.cli("nodes", "import", str(hosts))
    assert done.returncode == 1, done.stdout + done.stderr  # one host failed, the rest added
    assert done.stdout.count("added") == 3, done.stdout
    assert dead in done.stderr and "connect" in done.stderr, done.stderr

    nodes = {n["name"]: n for n in server.http.get("/api/v1/nodes").json()}
    assert sorted(nodes) == sorted(h.address for h in net.hosts)  # nothing for the dead one
    for h in net.hosts:
        node = nodes[h.address]
        assert (node["kind"], node["status"], node["ssh"], node["address"]) == (
            "ssh", "Ready", h.address, h.address
        )  # fmt: skip
        assert node["cpuCores"] >= 1 and node["memoryBytes"] > 2**28
        assert node["facts"]["ringleader"] and node["facts"]["python"]
        assert node["facts"]["torch"].startswith("2.")

    again = server.cli("nodes", "import", str(hosts_json(net, tmp_path / "again.json")))
    assert again.returncode == 0, again.stdout + again.stderr  # idempotent
    assert again.stdout.count("already registered") == 3

    listed = server.cli("nodes", "list")
    assert listed.returncode == 0 and listed.stdout.count("Ready") == 3, listed.stdout
    hostfile = server.cli("hostfile", "--from-nodes")
    assert hostfile.stdout.split("\n")[:3] == [f"{h.address} slots=1" for h in net.hosts]

    removed = server.cli("nodes", "remove", net.hosts[2].address)
    assert removed.returncode == 0, removed.stderr
    assert server.http.get(f"/api/v1/nodes/{net.hosts[2].address}").status_code == 404


def test_bad_node_requests_are_refused_with_the_field(
    cluster: tuple[Server, TestHostNetwork],
) -> None:
    server, net = cluster
    bad = server.http.post("/api/v1/nodes", json={"ssh": "-oProxyCommand=evil"})
    assert bad.status_code == 422 and "ssh" in bad.text
    wrong_pool = server.http.post("/api/v1/nodes", json={"ssh": net.hosts[0].address,
                                                         "pool": "Bad Pool"})  # fmt: skip
    assert wrong_pool.status_code == 422 and "pool" in wrong_pool.text
    unreachable = server.cli("nodes", "add", net.unreachable_address)
    assert unreachable.returncode != 0
    assert f"host {net.unreachable_address}: connect failed" in unreachable.stderr
    assert server.http.get("/api/v1/nodes").json() == []  # nothing half-created
    gone = server.http.delete("/api/v1/nodes/nosuch")
    assert gone.status_code == 404


def test_workload_runs_across_the_hosts_and_suspend_and_delete_stop_it_everywhere(
    cluster: tuple[Server, TestHostNetwork], tmp_path: Path
) -> None:
    server, net = cluster
    (tmp_path / "train.py").write_text(TRAIN)
    import_hosts(server, net, tmp_path)

    wid = server.submit("trio", tmp_path, "python train.py --hold")
    wait_until(
        lambda: sum("sum 6" in ln for ln in server.cli("logs", "trio").stdout.splitlines()) == 3,
        120,
        "a line from each of the 3 ranks",
    )
    pods = server.http.get(f"/api/v1/workloads/{wid}/pods").json()["pods"]
    assert sorted(p["node"] for p in pods) == sorted(h.address for h in net.hosts)
    logs = server.cli("logs", "trio").stdout
    for pod in pods:  # each rank ran on the node its pod was bound to
        rank = pod["ranks"][0]
        assert f"attempt 0 rank {rank}/3 on {pod['node']}: sum 6" in logs, logs
    job = f"rl-{wid}"
    assert job_pids(job)
    held = server.cli("nodes", "remove", pods[0]["node"])
    assert held.returncode != 0 and "runs workloads trio" in held.stderr, held.stderr
    _exec_reaches_the_pod_on_its_node(server, pods, tmp_path)

    assert server.cli("suspend", "trio").returncode == 0
    server.wait_phase(wid, {"Stopped"}, timeout=60)
    wait_until(lambda: not job_pids(job), 30, "every process of the suspended workload to end")
    assert server.cli("resume", "trio").returncode == 0
    server.wait_phase(wid, {"Running"}, timeout=60)
    wait_until(lambda: job_pids(job), 60, "the resumed workload's processes")

    assert server.cli("delete", "trio").returncode == 0
    gone = lambda: server.http.get(f"/api/v1/workloads/{wid}").status_code == 404  # noqa: E731
    wait_until(gone, 60, "the workload to be deleted")
    wait_until(lambda: not job_pids(job), 30, "every process of the workload to end")


def test_a_host_going_away_fails_fast_and_the_gang_restarts_on_the_others(
    cluster: tuple[Server, TestHostNetwork], tmp_path: Path
) -> None:
    server, net = cluster
    (tmp_path / "train.py").write_text(TRAIN)
    import_hosts(server, net, tmp_path)

    wid = server.submit("survivor", tmp_path, "python train.py --hold", backoffLimit=2)
    wait_until(
        lambda: server.cli("logs", "survivor").stdout.count("attempt 0") == 3, 120, "3 ranks up"
    )
    pods = {p["name"]: p for p in server.http.get(f"/api/v1/workloads/{wid}/pods").json()["pods"]}
    victim = pods["survivor-worker-1"]["node"]

    net.take_down(victim)
    # The bound (10 s) is a speed: not asserted here on a shared machine.
    wait_until(lambda: server.node(victim)["status"] == "NotReady", 60, "NotReady")
    assert "heartbeat" in server.node(victim)["message"]

    done = server.wait_phase(wid, {"Completed", "Failed"}, timeout=120)
    assert done["actualPhase"] == "Completed", done["phaseMessage"]
    events = server.http.get(f"/api/v1/workloads/{wid}/events").json()["events"]
    lost = [e for e in events if e["type"] == "NodeLost"]
    assert lost and victim in lost[0]["message"], events
    pods = server.http.get(f"/api/v1/workloads/{wid}/pods").json()["pods"]
    assert victim not in {p["node"] for p in pods}  # placed on the nodes that answer
    assert {p["attempt"] for p in pods} == {1}
    logs = server.cli("logs", "survivor").stdout
    assert logs.count("attempt 1 rank") == 3 and "sum 6" in logs, logs
    wait_until(lambda: not job_pids(f"rl-{wid}"), 30, "the cut-off host's ranks to stop")

    net.bring_up(victim)  # probed again, Ready again
    wait_until(lambda: server.node(victim)["status"] == "Ready", 30, "Ready again")


def test_a_crashing_gang_on_ssh_nodes_is_restarted_by_the_scheduler_until_backoff(
    cluster: tuple[Server, TestHostNetwork], tmp_path: Path
) -> None:
    server, net = cluster
    (tmp_path / "crash.py").write_text(
        "import os, sys, time\nprint('rank', os.environ['RANK'], 'up', flush=True)\n"
        "sys.exit(3) if os.environ['RANK'] == '0' else time.sleep(60)\n"
    )
    import_hosts(server, net, tmp_path)
    wid = server.submit("crashy", tmp_path, "python crash.py", workers=1, backoffLimit=1)
    done = server.wait_phase(wid, {"Completed", "Failed"}, timeout=120)
    assert done["actualPhase"] == "Failed" and done["attempt"] == 1
    assert "no restarts left (backoffLimit 1)" in done["phaseMessage"]
    assert "exit code 3" in done["phaseMessage"] or "exitcode 3" in done["phaseMessage"], done
    events = server.http.get(f"/api/v1/workloads/{wid}/events").json()["events"]
    requeued = [e for e in events if e["type"] == "PhaseChanged" and e["reason"] == "Failed"
                and "restarting on the nodes that answer" in (e["message"] or "")]  # fmt: skip
    assert len(requeued) == 1, events
    logs = server.cli("logs", "crashy").stdout
    assert logs.count("rank 0 up") == 2  # once per attempt
    wait_until(lambda: not job_pids(f"rl-{wid}"), 30, "no process left")


def test_an_image_no_node_can_pull_fails_the_gang_once_without_restarts(
    cluster: tuple[Server, TestHostNetwork], tmp_path: Path
) -> None:
    """Every host's pull is refused (nothing listens where the image's registry would
    be): the workload fails on its first attempt with the runtime's own words, as on
    the local backend; restarting it on other nodes would meet the same."""
    server, net = cluster
    import_hosts(server, net, tmp_path)
    image = "127.0.0.1:9/nowhere/such:1"
    wid = server.submit("nopull", tmp_path, "true", workers=1, backoffLimit=3, image=image)
    done = server.wait_phase(wid, {"Completed", "Failed"}, timeout=240)
    assert done["actualPhase"] == "Failed" and done["attempt"] == 0, done
    message = done["phaseMessage"]
    assert f"cannot pull image {image}" in message, message
    assert "not restarted: a restart would meet the same" in message, message
    events = server.http.get(f"/api/v1/workloads/{wid}/events").json()["events"]
    assert not [e for e in events if e["type"] == "PodRestarted"], events
    wait_until(lambda: not job_pids(f"rl-{wid}"), 30, "no process left")


def test_spread_puts_a_gang_without_requests_on_every_host(
    cluster: tuple[Server, TestHostNetwork], tmp_path: Path
) -> None:
    """Pods that request no CPU, memory or GPU change no node's free resources:
    ``--placement spread`` counts pods, so the 3-pod gang still lands one per host."""
    server, net = cluster
    import_hosts(server, net, tmp_path)
    wid = server.submit("bare", tmp_path, "true", compute={})
    done = server.wait_phase(wid, {"Completed", "Failed"})
    assert done["actualPhase"] == "Completed", done
    pods = server.http.get(f"/api/v1/workloads/{wid}/pods").json()["pods"]
    assert sorted(p["node"] for p in pods) == sorted(h.address for h in net.hosts), pods


def test_an_interactive_gang_on_ssh_nodes_holds_its_pods_for_exec_until_deleted(
    cluster: tuple[Server, TestHostNetwork], tmp_path: Path
) -> None:
    """Interactive workloads run on SSH nodes (exec reaches their process pods): each
    pod stays up after its command for a session on its own node; delete ends all."""
    server, net = cluster
    import_hosts(server, net, tmp_path)
    wid = server.submit("held", tmp_path, "echo started", interactive=True)
    server.wait_phase(wid, {"Running"})
    pods = server.http.get(f"/api/v1/workloads/{wid}/pods").json()["pods"]
    assert sorted(p["node"] for p in pods) == sorted(h.address for h in net.hosts), pods
    wait_until(lambda: server.cli("logs", "held").stdout.count("started") == 3, 60, "3 starts")
    for pod in pods:
        done = server.cli("exec", "held", "--pod", pod["name"], "--", "ip", "-4", "-o", "addr")
        assert done.returncode == 0 and f"inet {pod['node']}/" in done.stdout, (
            pod,
            done.stdout + done.stderr,
        )
    assert server.cli("delete", "held").returncode == 0
    gone = lambda: server.http.get(f"/api/v1/workloads/{wid}").status_code == 404  # noqa: E731
    wait_until(gone, 60, "the workload to be deleted")
    wait_until(lambda: not job_pids(f"rl-{wid}"), 30, "every process of the workload to end")


def _exec_reaches_the_pod_on_its_node(server: Server, pods: list[dict], cwd: Path) -> None:
    """``exec`` into a process pod on an SSH node runs there, in the pod's directory and
    environment; a session whose client goes leaves nothing running there."""
    pod = next(p for p in pods if p["name"] == "trio-worker-0")
    probe = 'echo "rank=$RANK job=$RINGLEADER_JOB_ID at=$(pwd)"; ip -4 -o addr show'
    done = server.cli("exec", "trio", "--pod", "trio-worker-0", "--", "sh", "-c", probe)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"rank={pod['ranks'][0]} job=rl-" in done.stdout, done.stdout
    assert f"at={cwd}" in done.stdout and f"inet {pod['node']}/" in done.stdout, done.stdout
    seconds = f"{time.time_ns() % 10**9 + 10**9}"  # a sleep no other process has
    client = subprocess.Popen(
        [*RINGLEADER, "exec", "trio", "--pod", "trio-worker-0", "--", "sleep", seconds],
        env=server.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: _sleeping(seconds), 60, "the session's sleep on the node")
    finally:
        client.kill()
        client.wait()
    wait_until(lambda: not _sleeping(seconds), 60, "the session's sleep to end")


def _sleeping(seconds: str) -> list[int]:
    """Live ``sleep SECONDS`` processes (on the test hosts too: they share /proc)."""
    found = []
    for pid in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if pid.isdigit() and Path(f"/proc/{pid}/cmdline").read_bytes() == (
                f"sleep\0{seconds}\0".encode()
            ):
                found.append(int(pid))
    return found

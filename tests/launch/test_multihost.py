"""Real multi-host launches: network-namespace hosts, each with its own sshd.

The launcher runs in the root namespace and reaches the hosts over OpenSSH
with keys and known_hosts generated for the test.  The filesystem is shared,
so "same path on every host" holds unless a test hides a directory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import job_pids, launch, start_launch, wait_for_ready, wait_until
from tests.fixtures.testhosts import (  # noqa: F401
    TestHostNetwork,
    make_test_hosts_fixture,
    test_hosts_fixture,
)

pytestmark = pytest.mark.multihost


def readable(stderr: str) -> str:
    """The launcher's words for a failed run, without a crash dump's list of
    extension modules (one line of thousands of characters that hides the cause)."""
    lines = [ln for ln in stderr.splitlines() if "Extension modules:" not in ln]
    return "\n".join(lines)[-4000:]


def hosts_json(net: TestHostNetwork, path: Path, slots: int | None = None) -> str:
    entries = [{"ssh": h.address, "ips": [h.address]} for h in net.hosts]
    if slots:
        for e in entries:
            e["slots"] = slots
    path.write_text(json.dumps(entries, indent=2))
    return str(path)


def on_hosts(net: TestHostNetwork, tmp_path: Path) -> list[str]:
    """The launch flags that run one rank on each of ``net``'s hosts."""
    return [
        "--hostfile",
        hosts_json(net, tmp_path / "hosts.json"),
        "--ssh-config",
        str(net.ssh_config),
    ]


def test_digits_across_three_hosts(test_hosts: TestHostNetwork, tmp_path: Path) -> None:
    net = test_hosts
    proc = launch(
        *on_hosts(net, tmp_path),
        "--run-id",
        "rl-mh-digits",
        "--",
        "python",
        "-m",
        "ringleader.examples.digits",
        "--epochs",
        "6",
        cwd=tmp_path,
        timeout=240,
    )
    assert proc.returncode == 0, readable(proc.stderr)
    for h in net.hosts:  # the launcher picked the interface toward the master on each host
        assert f"{h.address}: ranks {h.index}, interface eth0 (routes to the master)" in proc.stderr
    accuracy = float(
        re.search(r"^\[0/3 \S+\] final test accuracy: ([0-9.]+)", proc.stdout, re.M).group(1)
    )
    assert accuracy >= 0.9
    assert re.search(rf"^\[0/3 {net.hosts[0].address}\] epoch 1/6", proc.stdout, re.M)
    assert job_pids("rl-mh-digits") == []


ENV_AND_IFACE = """
import json, os
print("ENV " + json.dumps({k: os.environ.get(k) for k in
      ("RANK", "LOCAL_RANK", "NODE_RANK", "NNODES", "MASTER_ADDR", "GLOO_SOCKET_IFNAME", "RINGLEADER_NODE_IPS")}))
"""


def test_host_list_with_two_slots_each(make_test_hosts, tmp_path: Path) -> None:
    net = make_test_hosts(2)
    (tmp_path / "env.py").write_text(ENV_AND_IFACE)
    flag = ",".join(f"{h.address}:2" for h in net.hosts)
    proc = launch(
        "-H", flag, "--ssh-config", str(net.ssh_config), "--", "python", "env.py", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    envs = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^\[(\d)/4 (\S+)\] ENV (.*)$", line)
        envs[int(m.group(1))] = (m.group(2), json.loads(m.group(3)))
    assert sorted(envs) == [0, 1, 2, 3]
    a, b = net.hosts[0].address, net.hosts[1].address
    assert [envs[r][0] for r in range(4)] == [a, a, b, b]
    assert [envs[r][1]["LOCAL_RANK"] for r in range(4)] == ["0", "1", "0", "1"]
    assert [envs[r][1]["NODE_RANK"] for r in range(4)] == ["0", "0", "1", "1"]
    assert all(
        e["MASTER_ADDR"] == a and e["GLOO_SOCKET_IFNAME"] == "eth0" for _, e in envs.values()
    )
    assert envs[3][1]["RINGLEADER_NODE_IPS"] == f"{a}\n{b}"


FAIL_ON_HOST_2 = """
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
if dist.get_rank() == 2:
    print("disk full on this host", file=sys.stderr)
    sys.exit(7)
dist.all_reduce(torch.ones(8))    # the others wait for a peer that is gone
time.sleep(300)
"""


def test_fail_fast_across_hosts(test_hosts: TestHostNetwork, tmp_path: Path) -> None:
    net = test_hosts
    (tmp_path / "train.py").write_text(FAIL_ON_HOST_2)
    proc = launch(
        *on_hosts(net, tmp_path),
        "--run-id",
        "rl-mh-fail",
        "--",
        "python",
        "train.py",
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 7, readable(proc.stderr)
    summary = proc.stderr.split("Root Cause", 1)[1]
    assert f"host      : {net.hosts[2].address}" in summary
    assert "disk full on this host" in summary
    assert job_pids("rl-mh-fail") == []


def test_kill_9_of_launcher_stops_every_host(test_hosts: TestHostNetwork, tmp_path: Path) -> None:
    net = test_hosts
    (tmp_path / "wait.py").write_text(
        "import subprocess, time\nsubprocess.Popen(['sleep', '300'])\nprint('ready', flush=True)\ntime.sleep(300)\n"
    )
    job = "rl-mh-kill9"
    proc = start_launch(
        *on_hosts(net, tmp_path),
        "--run-id",
        job,
        "--",
        "python",
        "wait.py",
        cwd=tmp_path,
    )
    wait_for_ready(proc, 3)
    assert len(job_pids(job)) >= 9  # 3 agents, 3 ranks, 3 grandchildren
    proc.kill()
    proc.wait()
    wait_until(lambda: job_pids(job) == [], timeout=5, what="every host's processes to end")


def test_unreachable_host_is_named_and_nothing_starts(make_test_hosts, tmp_path: Path) -> None:
    net = make_test_hosts(2)
    marker = tmp_path / "started"
    (tmp_path / "t.py").write_text(f"open({str(marker)!r}, 'a').write('x')\n")
    flag = f"{net.hosts[0].address},{net.unreachable_address},{net.hosts[1].address}"
    proc = launch(
        "-H",
        flag,
        "--ssh-config",
        str(net.ssh_config),
        "--",
        "python",
        "t.py",
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 3
    assert f"host {net.unreachable_address}: connect failed" in proc.stderr
    assert "fix:" in proc.stderr
    assert not marker.exists()


def test_missing_working_directory_is_reported_per_host(make_test_hosts, tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    (work / "t.py").write_text("print('ran')\n")
    net = make_test_hosts(3, hidden_dirs={1: [work]})
    proc = launch(
        *on_hosts(net, tmp_path),
        "--",
        "python",
        "t.py",
        cwd=work,
        timeout=60,
    )
    assert proc.returncode == 3
    assert (
        f"host {net.hosts[1].address}: working directory failed: {work} does not exist"
        in proc.stderr
    )
    assert net.hosts[0].address + ":" not in proc.stderr.split("no rank was started", 1)[1]
    assert "ran" not in proc.stdout


def test_unknown_host_key_is_refused_not_prompted(make_test_hosts, tmp_path: Path) -> None:
    net = make_test_hosts(1)
    config = tmp_path / "ssh_config"
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    config.write_text(net.ssh_config.read_text().replace(str(net.known_hosts), str(empty)))
    proc = launch(
        "-H",
        net.hosts[0].address,
        "--ssh-config",
        str(config),
        "--",
        "true",
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 3
    assert f"host {net.hosts[0].address}: host key failed" in proc.stderr
    assert "known_hosts" in proc.stderr


def test_mpi_framework_across_hosts(make_test_hosts, mpirun_available, tmp_path: Path) -> None:
    net = make_test_hosts(2)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{h.address} slots=1\n" for h in net.hosts))
    proc = launch(
        "--framework",
        "mpi",
        "--hostfile",
        str(hostfile),
        "--ssh-config",
        str(net.ssh_config),
        "--network-interface",
        "eth0",
        "--run-id",
        "rl-mh-mpi",
        "--",
        "python",
        "-m",
        "mpi4py.bench",
        "helloworld",
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, readable(proc.stderr)
    for rank, h in enumerate(net.hosts):
        assert re.search(
            rf"^\[{rank}/2 {h.address}\] Hello, World! I am process {rank} of 2", proc.stdout, re.M
        )
    assert job_pids("rl-mh-mpi") == []


def test_missing_interpreter_is_reported_per_host(make_test_hosts, tmp_path: Path) -> None:
    import sys

    venv = Path(sys.executable).parent.parent
    net = make_test_hosts(2, hidden_dirs={0: [venv]})
    proc = launch(
        *on_hosts(net, tmp_path),
        "--",
        "python",
        "-c",
        "print('ran')",
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 3
    assert (
        f"host {net.hosts[0].address}: interpreter failed: {sys.executable} does not exist"
        in proc.stderr
    )
    assert "ran" not in proc.stdout


def test_host_going_away_fails_fast_and_its_ranks_stop(
    test_hosts: TestHostNetwork, tmp_path: Path
) -> None:

    net = test_hosts
    (tmp_path / "wait.py").write_text("import time\nprint('ready', flush=True)\ntime.sleep(300)\n")
    job = "rl-mh-gone"
    proc = start_launch(
        *on_hosts(net, tmp_path),
        "--run-id",
        job,
        "--",
        "python",
        "wait.py",
        cwd=tmp_path,
    )
    wait_for_ready(proc, 3)
    net.take_down(1)
    code = proc.wait(timeout=60)  # ssh keepalives notice (bench/, not a test, times it)
    assert code == 255
    err = proc.stderr.read()
    assert f"host      : {net.hosts[1].address}" in err and "lost the link" in err
    # The cut-off host's agent hears no heartbeat and stops its ranks by itself.
    wait_until(lambda: job_pids(job) == [], timeout=15, what="the cut-off host's ranks to stop")


WIDE = """
import os, sys, time
rank = int(os.environ["RANK"])
for i in range(200):  # long lines from every rank at once: none may be cut or mixed
    print(f"LINE {rank} {i} " + str(rank % 10) * 400, flush=True)
open(f"printed-{rank}", "w").close()  # the filesystem is shared: a barrier for rank 13
if rank == 13:
    while len([n for n in os.listdir(".") if n.startswith("printed-")]) < 16:
        time.sleep(0.05)
    print("rank 13 gives up", file=sys.stderr)
    sys.exit(3)
time.sleep(300)
"""


def test_sixteen_ranks_on_four_hosts_keep_whole_lines_fail_fast_and_leave_nothing(
    make_test_hosts, tmp_path: Path
) -> None:
    """At width (issue 27, item 4): 4 hosts x 4 ranks print long lines at once, every line
    arrives whole under its own rank's prefix; one rank's exit stops all 16 everywhere,
    names that rank and its host, and no process of the job is left on any host."""
    net = make_test_hosts(4)
    (tmp_path / "wide.py").write_text(WIDE)
    job = "rl-mh-wide"
    proc = launch(
        "--hostfile", hosts_json(net, tmp_path / "hosts.json", slots=4),
        "--ssh-config", str(net.ssh_config), "--run-id", job,
        "--", "python", "wide.py", cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 3, readable(proc.stderr)
    seen: dict[int, int] = {}
    for line in proc.stdout.splitlines():
        m = re.fullmatch(r"\[(\d+)/16 (\S+)\] LINE (\d+) (\d+) (\d{400})", line)
        if line.split("] ", 1)[-1].startswith("LINE"):
            assert m, f"a cut or mixed line: {line[:120]}"
            assert m.group(1) == m.group(3) and set(m.group(5)) == {str(int(m.group(3)) % 10)}
            seen[int(m.group(1))] = seen.get(int(m.group(1)), 0) + 1
    assert seen == dict.fromkeys(range(16), 200), sorted(seen.items())
    summary = proc.stderr.split("Root Cause", 1)[1]
    assert "rank      : 13" in summary and f"host      : {net.hosts[3].address}" in summary
    assert "rank 13 gives up" in summary
    assert job_pids(job) == []

"""MPI in an image: the launcher pod's mpirun starts its ranks in the worker pods
through ringleader (launch/mpi_bridge.py), as Kubeflow's MPIJob does with ``kubectl
exec``, so the image needs no ssh (the test image has none).

Real parts: rootful podman, Debian's OpenMPI and mpi4py in an image made here
(``image base``), a real server (local backend).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import signal
import subprocess
from pathlib import Path

import pytest

from ringleader.server.backends.local.cgroup_versions import detect
from tests.conftest import wait_until
from tests.fixtures.images import job_containers, podman
from tests.fixtures.images import mpi_image as mpi_image  # the fixture
from tests.fixtures.tenants import Site
from tests.fixtures.tenants import tenant_site as tenant_site  # the fixture: site
from tests.helpers.cgroups import processes_with_arg, unique_seconds
from tests.server.conftest import ServerProcess, running_server

PROBE = (
    "import os; from mpi4py import MPI; c = MPI.COMM_WORLD; "
    "total = c.allreduce(c.rank + 1); "
    "print('RANK', c.rank, 'OF', c.size, 'SUM', total, 'IN', os.environ.get('RINGLEADER_POD'), "
    "open('/etc/os-release').read().split(chr(10))[0], flush=True)"
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    where = tmp_path / "work"
    where.mkdir(mode=0o755)
    return where


def _submit(server: ServerProcess, name: str, image: str, cwd: Path, *command: str) -> str:
    done = server.cli("submit-mpi", name, "--processes", "2", "-i", image, "--command", "--",
                      *command, cwd=str(cwd))  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = re.search(r"\(id (\w+),", done.stdout)
    assert found, done.stdout
    return found.group(1)


def _ended(server: ServerProcess, name: str) -> str:
    def status() -> str | None:
        text = server.cli("describe", name).stdout
        found = re.search(r"Status:\s+(\w+)", text)
        return text if found and found.group(1) in {"Completed", "Failed"} else None

    return str(wait_until(status, 240, f"{name} to end"))


def test_mpirun_in_the_launcher_pod_runs_each_rank_in_its_worker_pod(
    mpi_image: str, tmp_path: Path, work: Path
) -> None:
    assert podman("run", "--rm", mpi_image, "sh", "-c", "command -v ssh").returncode != 0
    with running_server(tmp_path / "home") as server:
        workload = _submit(server, "allr", mpi_image, work, "python3", "-c", PROBE)
        described = _ended(server, "allr")
        logs = server.cli("logs", "allr").stdout
        assert "Status: Completed" in described, described + logs
        # Each rank in its own worker pod's container, the image's Debian, one allreduce.
        for rank in (0, 1):
            want = f'RANK {rank} OF 2 SUM 3 IN allr-worker-{rank} PRETTY_NAME="Debian GNU/Linux'
            assert want in logs, logs
        wait_until(lambda: not job_containers(f"rl-{workload}"), 60, "its containers removed")

        # A rank that fails fails the gang, with that rank named, and leaves nothing.
        failing = _submit(server, "bad", mpi_image, work, "python3", "-c",
                          "from mpi4py import MPI; import sys; "
                          "sys.exit(3 if MPI.COMM_WORLD.rank == 1 else 0)")  # fmt: skip
        described = _ended(server, "bad")
        assert "Status: Failed" in described, described
        assert re.search(r"rank 1\b", described), described
        wait_until(lambda: not job_containers(f"rl-{failing}"), 60, "its containers removed")


def test_a_plain_mpirun_in_an_interactive_launcher_reaches_the_worker_pods(
    mpi_image: str, tmp_path: Path, work: Path
) -> None:
    """Seed 001's interactive MPI workload, in an image: a shell in the launcher runs
    ``mpirun`` with no hostfile or rsh flag (OpenMPI's defaults point at the gang's, as
    in Kubeflow's launcher), while the gang's own ranks still run in the same pods."""
    with running_server(tmp_path / "home") as server:
        done = server.cli("submit-mpi", "dint", "--processes=2", "-i", mpi_image,
                          "--command=sh", "--args=-c", "--args=sleep infinity", "--interactive",
                          cwd=str(work))  # fmt: skip
        assert done.returncode == 0, done.stderr
        workload = re.search(r"\(id (\w+),", done.stdout).group(1)  # type: ignore[union-attr]
        wait_until(lambda: len(job_containers(f"rl-{workload}")) == 3, 180, "its 3 pods up")
        ran = server.cli("exec", "dint", "--pod", "dint-launcher", "--", "mpirun", "-np", "2",
                         "python3", "-c", PROBE)  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        for rank in (0, 1):
            assert f"RANK {rank} OF 2 SUM 3 IN dint-worker-{rank}" in ran.stdout, ran.stdout
        # Its containers ended with it: the gang's own three are what is left.
        wait_until(lambda: len(job_containers(f"rl-{workload}")) == 3, 60, "the extra ones gone")
        assert server.cli("delete", "dint").returncode == 0
        wait_until(lambda: not job_containers(f"rl-{workload}"), 60, "its containers removed")


def test_killing_the_supervisor_of_an_mpi_gang_in_an_image_leaves_no_container(
    mpi_image: str, tmp_path: Path, work: Path
) -> None:
    """kill -9 of the run's supervisor, agent and podman clients (its supervisor cgroup)
    while mpirun's daemons hold the worker pods: the server fails the run and removes
    every container, the bridge's worker pods' too, and nothing of it runs on."""
    hierarchy = detect()
    assert hierarchy is not None
    seconds = unique_seconds()
    hold = ("python3 -c \"from mpi4py import MPI; MPI.COMM_WORLD.Barrier(); print('up', "
            f"flush=True)\" && exec sleep {seconds}")  # fmt: skip
    with running_server(tmp_path / "home") as server:
        workload = _submit(server, "gone", mpi_image, work, "sh", "-c", hold)
        wait_until(lambda: server.cli("logs", "gone").stdout.count("up") >= 2, 180, "2 ranks up")
        wait_until(lambda: len(processes_with_arg(seconds)) >= 2, 60, "both ranks holding")
        assert len(job_containers(f"rl-{workload}")) == 3  # the launcher, two worker pods
        for pid in hierarchy.pids(f"rl-{workload}/supervisor"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert "Status: Failed" in _ended(server, "gone")
        wait_until(lambda: not job_containers(f"rl-{workload}"), 120, "its containers removed")
        wait_until(lambda: not processes_with_arg(seconds), 60, "no rank of it left")


ATTACK = """
import json, socket, struct, sys
conn = socket.socket(socket.AF_UNIX)
conn.connect(sys.argv[1])
print("CONNECTED", flush=True)
try:
    conn.sendall(json.dumps({"pod": sys.argv[2], "argv": ["id"]}).encode() + b"\\n")
except OSError:
    pass  # refused before it asked: what it was told is still there to read
frames = conn.makefile("rb")
while True:
    head = frames.read(5)
    if len(head) < 5:
        break
    kind, size = head[:1], struct.unpack(">I", head[1:])[0]
    if kind == b"x":
        print("EXIT", size, flush=True)
        break
    print(kind.decode(), frames.read(size).decode(errors="replace"), flush=True)
"""


def test_another_account_reaching_the_bridge_starts_nothing_in_the_gangs_pods(
    mpi_image: str, site: Site
) -> None:
    """The bridge's socket is in the launcher's run dir, which another account on the
    host may find and enter: it connects, and is refused by who it is (the kernel's
    SO_PEERCRED), not by anything it says; no container of the gang is started."""
    alice = site.user("alice")
    hold = ("from mpi4py import MPI; MPI.COMM_WORLD.Barrier(); print('up', flush=True); "
            "import time; time.sleep(600)")  # fmt: skip
    done = site.as_user(alice, "submit-mpi", "held", "--processes", "2", "-i", mpi_image,
                        "--command", "--", "python3", "-c", hold)  # fmt: skip
    assert done.returncode == 0, done.stderr
    wait_until(lambda: site.server.cli("logs", "held").stdout.count("up") >= 2, 180, "2 ranks up")
    workload = site.workload_id("held")
    sockets = glob.glob(f"/tmp/ringleader-rl-{workload}-node0-*/mpi-rsh.sock")
    assert len(sockets) == 1, sockets
    before = sorted(job_containers(f"rl-{workload}"))
    assert len(before) == 3, before  # the launcher and the two worker pods
    other = site.account()
    attack = subprocess.run(
        ["runuser", "-u", other, "--", "/usr/bin/python3", "-c", ATTACK, sockets[0],
         "held-worker-0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "CONNECTED" in attack.stdout, attack.stdout + attack.stderr  # it got that far
    uid = pwd.getpwnam(other).pw_uid
    assert f"ringleader: uid {uid} may start no pod of this run" in attack.stdout, attack.stdout
    assert "EXIT 255" in attack.stdout and "uid=" not in attack.stdout, attack.stdout
    # The pod's own account may ask only for its run's worker pods.
    own = subprocess.run(
        ["runuser", "-u", f"{site.prefix}-alice", "--", "/usr/bin/python3", "-c", ATTACK,
         sockets[0], "someone-elses-pod"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "no worker pod 'someone-elses-pod' in this run" in own.stdout, own.stdout + own.stderr
    assert sorted(job_containers(f"rl-{workload}")) == before
    assert site.as_user(alice, "delete", "held").returncode == 0
    wait_until(lambda: not job_containers(f"rl-{workload}"), 60, "its containers removed")

"""--framework mpi: mpirun starts the gang; prefixes, env mapping, fail-fast, no orphans."""

from __future__ import annotations

import re

import pytest

from tests.conftest import job_pids, launch, start_launch, wait_for_ready, wait_until

pytestmark = pytest.mark.usefixtures("mpirun_available")


def test_mpi4py_helloworld_with_prefixes() -> None:
    proc = launch(
        "--framework",
        "mpi",
        "-n",
        "3",
        "--run-id",
        "rl-mpihello",
        "--",
        "python",
        "-m",
        "mpi4py.bench",
        "helloworld",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for rank in range(3):
        assert re.search(
            rf"^\[{rank}/3 localhost\] Hello, World! I am process {rank} of 3", proc.stdout, re.M
        )
    assert job_pids("rl-mpihello") == []


def test_ranks_get_torchrun_names_from_ompi(script) -> None:
    body = "import os; print('R', os.environ['RANK'], os.environ['WORLD_SIZE'], os.environ['LOCAL_RANK'], os.environ['MASTER_PORT'])"
    proc = launch(
        "--framework", "mpi", "-n", "2", "--no-prefix", "--", "python", script(body), timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = sorted(proc.stdout.split("\n")[:-1])
    assert [ln.split()[:4] for ln in lines] == [["R", "0", "2", "0"], ["R", "1", "2", "1"]]


def test_mpi_failure_names_the_rank_and_cleans_up(script) -> None:
    body = (
        "import os, sys, time, subprocess\nsubprocess.Popen(['sleep', '300'])\n"
        "if os.environ['RANK'] == '2':\n    print('bad batch', file=sys.stderr); sys.exit(9)\n"
        "time.sleep(300)\n"
    )
    proc = launch(
        "--framework",
        "mpi",
        "-n",
        "3",
        "--run-id",
        "rl-mpifail",
        "--",
        "python",
        script(body),
        timeout=120,
    )
    assert proc.returncode == 9
    summary = proc.stderr.split("Root Cause", 1)[1]
    assert re.search(r"rank\s+: 2\b", summary) and "bad batch" in summary
    assert job_pids("rl-mpifail") == []


def test_mpi_kill_9_of_the_launcher(script) -> None:
    job = "rl-mpikill"
    proc = start_launch(
        "--framework",
        "mpi",
        "-n",
        "2",
        "--run-id",
        job,
        "--",
        "python",
        script("import time; print('ready', flush=True); time.sleep(300)"),
    )
    wait_for_ready(proc, 2)
    proc.kill()
    proc.wait()
    wait_until(lambda: job_pids(job) == [], timeout=5, what="mpirun and its ranks to end")

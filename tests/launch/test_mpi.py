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


# ----- issue 13: failures never crash the launcher; lines rebuilt; repeated hosts -------


def test_a_missing_command_fails_with_its_root_cause_never_a_traceback() -> None:
    proc = launch("--framework", "mpi", "-n", "2", "--run-id", "rl-mpinocmd", "--", "nosuchcmd")
    assert proc.returncode == 127, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "RINGLEADER-RANK-EXIT" not in proc.stderr + proc.stdout  # read, not shown
    # Each rank's line whole, no mpirun tag glued to its end (a rank may be stopped
    # before it writes: mpirun aborts the job at the first failure).
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("[")]
    assert said and all(
        re.fullmatch(r"\[[01]/2 localhost\] cannot start 'nosuchcmd': command not found "
                     r"\(not on PATH\)", ln) for ln in said
    ), proc.stderr  # fmt: skip
    summary = proc.stderr.split("Root Cause", 1)[1]
    assert re.search(r"exit code : 127", summary), summary
    assert "reason    : cannot start 'nosuchcmd': command not found" in summary
    assert job_pids("rl-mpinocmd") == []


def test_a_rank_whose_wrapper_is_killed_is_named_from_mpiruns_report(script) -> None:
    body = (
        "import os, signal, time\n"
        "if os.environ['RANK'] == '1':\n    os.kill(os.getppid(), signal.SIGKILL)\n"
        "time.sleep(300)\n"
    )
    proc = launch("--framework", "mpi", "-n", "2", "--", "python", script(body), timeout=120)
    assert proc.returncode == 137, proc.stderr
    assert "Traceback" not in proc.stderr
    summary = proc.stderr.split("Root Cause", 1)[1]
    assert re.search(r"rank\s+: 1\b", summary), summary
    assert "signal  : SIGKILL" in summary or "SIGKILL" in summary, summary


def test_long_and_piecewise_lines_are_rebuilt_per_rank(script) -> None:
    """mpirun cuts a 10 KB line into 2-4 KiB chunks, each tagged, and glues one rank's
    unfinished line to the next rank's tag: every rank's lines come back whole."""
    body = (
        "import os, sys, time\n"
        "r = os.environ['RANK']\n"
        "for i in range(3):\n"
        "    os.write(1, (r * 10000 + '\\n').encode())\n"
        "    os.write(1, f'part1-{r}-{i}'.encode()); time.sleep(0.05)\n"
        "    os.write(1, f'-part2-{r}-{i}\\n'.encode())\n"
        "    print(f'err {r} {i}', file=sys.stderr, flush=True)\n"
    )
    proc = launch("--framework", "mpi", "-n", "2", "--", "python", script(body), timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for r in "01":
        own = [ln.split("] ", 1)[1] for ln in lines if ln.startswith(f"[{r}/2 localhost] ")]
        assert own.count(r * 10000) == 3, [len(x) for x in own]
        assert [x for x in own if x.startswith("part1")] == [
            f"part1-{r}-{i}-part2-{r}-{i}" for i in range(3)
        ]
        assert len(own) == 6, own
        assert [f"[{r}/2 localhost] err {r} {i}" for i in range(3)] == [
            ln for ln in proc.stderr.splitlines() if ln.startswith(f"[{r}/2")
        ]
    assert "<stdout>" not in proc.stdout and "<stderr>" not in proc.stderr


def test_a_hostfile_listing_this_machine_several_times_runs(script, tmp_path) -> None:
    """MLX's hosts.json lists one machine once per rank: one `localhost slots=3` line."""
    hosts = tmp_path / "hosts.json"
    hosts.write_text('[{"ssh": "localhost"}, {"ssh": "localhost"}, {"ssh": "127.0.0.1"}]')
    body = (
        "import os\nprint('R', os.environ['RANK'], os.environ['WORLD_SIZE'], flush=True)\n"
        "print(open(os.environ['RINGLEADER_HOSTFILE']).read().strip())"
    )
    proc = launch(
        "--framework", "mpi", "--hostfile", str(hosts), "--no-prefix", "--", "python", script(body),
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(ln for ln in proc.stdout.splitlines() if ln.startswith("R ")) == [
        "R 0 3", "R 1 3", "R 2 3"
    ]  # fmt: skip
    assert proc.stdout.count("localhost slots=3") == 3
    assert "multiple definitions" not in proc.stderr

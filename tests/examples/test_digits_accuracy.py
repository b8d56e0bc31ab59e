"""The digits example learns, with 2 ranks on defaults and as a plain single process.

Also pins the output lines that benchmarks and the launcher parse.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.helpers.launched import LAUNCHER_NAMES, LAUNCHER_PREFIXES, TIMEOUT_S, run_ranks

ACCURACY = re.compile(r"^final test accuracy: (\d\.\d{4})$", re.M)
FIRST_STEP = re.compile(r"^RINGLEADER_BENCH first_step_unix=(\d+\.\d+)$", re.M)
STEADY = re.compile(r"^RINGLEADER_BENCH steady_steps_per_s=(\S+) steps=(\d+)$", re.M)
EPOCH = re.compile(r"^epoch (\d+)/(\d+): train loss (\d+\.\d{4})$", re.M)


def test_two_ranks_reach_95_percent_with_defaults() -> None:
    rank0, rank1 = run_ranks(2, ["--bench"])
    match = ACCURACY.search(rank0.stdout)
    assert match, rank0.stdout
    assert float(match.group(1)) >= 0.95, rank0.stdout
    epochs = EPOCH.findall(rank0.stdout)
    assert len(epochs) == int(epochs[0][1]) >= 1
    assert float(epochs[-1][2]) < float(epochs[0][2])  # the (rank-averaged) loss fell
    first_step, steady = FIRST_STEP.search(rank0.stdout), STEADY.search(rank0.stdout)
    assert first_step and steady, rank0.stdout
    assert float(steady.group(1)) > 0 and int(steady.group(2)) > 0
    assert rank1.stdout == ""  # only rank 0 prints


def test_single_process_without_launcher() -> None:
    """No launcher names at all: a world of one, still the same output lines."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in LAUNCHER_NAMES and not k.startswith(LAUNCHER_PREFIXES)
    }
    proc = subprocess.run(
        [sys.executable, "-m", "ringleader.examples.digits", "--max-steps", "5", "--bench"],
        env={**env, "OMP_NUM_THREADS": "2"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert ACCURACY.search(proc.stdout) and FIRST_STEP.search(proc.stdout), proc.stdout
    steady = STEADY.search(proc.stdout)
    assert steady and steady.group(2) == "3", proc.stdout  # 5 steps minus 2 warm-up
    assert [e[:2] for e in EPOCH.findall(proc.stdout)] == [("1", "10")]  # stopped in epoch 1


def test_no_bench_lines_without_bench() -> None:
    """A user's run prints the training alone: the timing lines are for ``bench/``."""
    proc = subprocess.run(
        [sys.executable, "-m", "ringleader.examples.digits", "--max-steps", "3"],
        env={**os.environ, "OMP_NUM_THREADS": "2"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert ACCURACY.search(proc.stdout) and "RINGLEADER_BENCH" not in proc.stdout, proc.stdout

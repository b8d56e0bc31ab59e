"""Each framework's real package, started by ``ringleader launch --framework NAME`` on
this machine (issue 25): TensorFlow, JAX and XGBoost programs train on the digits
across two processes to what one process reaches, and TensorFlow's ranks get one
``TF_CONFIG`` naming a port of their own each.

With ``CI=true`` a missing package fails (``require``), never skips.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require

RL = [sys.executable, "-m", "ringleader", "launch"]


def _package(name: str) -> None:
    require(importlib.util.find_spec(name) is not None, f"{name} (pip: the examples extra)")


def _accuracy(output: str) -> float:
    found = re.findall(r"final test accuracy: ([0-9.]+)", output)
    assert len(found) == 1, output  # rank 0 alone says it
    return float(found[0])


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_a_jax_program_trains_across_two_processes_as_one_would(tmp_path: Path) -> None:
    """``runtime.init()`` joins JAX's world from the launcher's names; a cross-process
    psum sees both; full-batch data-parallel steps end where one process's do."""
    _package("jax")
    example = ["python", "-m", "ringleader.examples.jax_digits", "--steps", "100"]
    gang = _run([*RL, "-n", "2", "--framework", "jax", "--", *example], tmp_path)
    assert "psum of process ids: 1 (2 processes)" in gang.stdout, gang.stdout
    alone = _run([sys.executable, *example[1:]], tmp_path)
    assert "psum of process ids: 0 (1 processes)" in alone.stdout, alone.stdout
    assert _accuracy(gang.stdout) == pytest.approx(_accuracy(alone.stdout), abs=0.003)
    assert _accuracy(alone.stdout) > 0.9


def test_an_xgboost_program_trains_across_two_ranks_as_one_would(tmp_path: Path) -> None:
    """The master runs XGBoost's tracker on MASTER_ADDR:MASTER_PORT, each rank holds
    half the rows; the model scores within 0.02 of one process's on all rows."""
    _package("xgboost")
    example = ["python", "-m", "ringleader.examples.xgboost_digits", "--rounds", "20"]
    gang = _run([*RL, "-n", "2", "--framework", "xgboost", "--", *example], tmp_path)
    assert "rank 0 of 2: 719 training rows here" in gang.stdout, gang.stdout
    alone = _run([sys.executable, *example[1:]], tmp_path)
    assert "rank 0 of 1: 1437 training rows here" in alone.stdout, alone.stdout
    assert _accuracy(gang.stdout) == pytest.approx(_accuracy(alone.stdout), abs=0.02)
    assert _accuracy(alone.stdout) > 0.9


def test_a_tensorflow_program_trains_across_two_workers_as_one_would(tmp_path: Path) -> None:
    """MultiWorkerMirroredStrategy reads the TF_CONFIG each rank gets; full-batch steps
    with the gradient summed across workers end where one worker's do."""
    _package("tensorflow")
    example = ["python", "-m", "ringleader.examples.tf_digits", "--steps", "100"]
    gang = _run([*RL, "-n", "2", "--framework", "tf", "--", *example], tmp_path)
    assert "[0/2 localhost] workers: 2" in gang.stdout, gang.stdout
    alone = _run([sys.executable, *example[1:]], tmp_path)
    assert "workers: 1" in alone.stdout, alone.stdout
    assert _accuracy(gang.stdout) == pytest.approx(_accuracy(alone.stdout), abs=0.003)
    assert _accuracy(alone.stdout) > 0.9


DUMP = "import os; print('CONFIG', os.environ.get('TF_CONFIG'))"


def test_tensorflow_ranks_get_one_cluster_each_with_their_own_task(tmp_path: Path) -> None:
    done = _run([*RL, "-n", "3", "--framework", "tf", "--no-prefix", "--",
                 "python", "-c", DUMP], tmp_path)  # fmt: skip
    configs = [json.loads(line[7:]) for line in done.stdout.splitlines()
               if line.startswith("CONFIG ")]  # fmt: skip
    assert len(configs) == 3 and len({json.dumps(c["cluster"]) for c in configs}) == 1
    cluster = configs[0]["cluster"]
    assert len(cluster["chief"]) == 1 and len(cluster["worker"]) == 2
    addresses = cluster["chief"] + cluster["worker"]
    assert len(set(addresses)) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
    tasks = sorted((c["task"]["type"], c["task"]["index"]) for c in configs)
    assert tasks == [("chief", 0), ("worker", 0), ("worker", 1)]


def test_a_jax_world_not_the_one_expected_fails_naming_what_formed(tmp_path: Path) -> None:
    """runtime.init() checks the JAX world with a real all-gather, as it does torch's."""
    _package("jax")
    program = ("import jax; from ringleader import runtime; "
               "runtime.init(expected_world_size=3)")  # fmt: skip
    done = subprocess.run([*RL, "-n", "2", "--framework", "jax", "--", "python", "-c", program],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode != 0, done.stdout
    assert "WorldSizeMismatch: JAX formed a world of 2 process(es)" in done.stderr, done.stderr
    assert "not the 3 launched" in done.stderr

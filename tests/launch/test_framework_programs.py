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


# framework -> (its example, a short run's arguments, what rank 0 says in a gang of 2
# and alone, how far apart the two accuracies may be)
PROGRAMS = {
    # TF: MultiWorkerMirroredStrategy reads the TF_CONFIG each rank gets; the gradient is
    # summed across workers, so full-batch steps end where one worker's do.
    "tf": ("tensorflow", "ringleader.examples.tf_digits", ["--steps", "100"],
           "[0/2 localhost] workers: 2", "workers: 1", 0.003),
    # JAX: runtime.init() joins JAX's world from the launcher's names; a cross-process
    # psum sees both; jax.jit all-reduces the gradient.
    "jax": ("jax", "ringleader.examples.jax_digits", ["--steps", "100"],
            "psum of process ids: 1 (2 processes)", "psum of process ids: 0 (1 processes)",
            0.003),
    # XGBoost: the master runs the tracker on MASTER_ADDR:MASTER_PORT, each rank holds
    # half the rows; the merged quantile sketch may place a bin edge differently.
    "xgboost": ("xgboost", "ringleader.examples.xgboost_digits", ["--rounds", "20"],
                "rank 0 of 2: 719 training rows here", "rank 0 of 1: 1437 training rows here",
                0.02),
}  # fmt: skip


@pytest.mark.parametrize("framework", PROGRAMS)
def test_a_program_trains_across_two_processes_as_one_would(framework: str, tmp_path: Path) -> None:
    package, module, args, in_gang, alone_says, tolerance = PROGRAMS[framework]
    _package(package)
    example = ["python", "-m", module, *args]
    gang = _run([*RL, "-n", "2", "--framework", framework, "--", *example], tmp_path)
    assert in_gang in gang.stdout, gang.stdout
    alone = _run([sys.executable, *example[1:]], tmp_path)
    assert alone_says in alone.stdout, alone.stdout
    assert _accuracy(gang.stdout) == pytest.approx(_accuracy(alone.stdout), abs=tolerance)
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

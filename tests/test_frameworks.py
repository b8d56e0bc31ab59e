"""The frameworks registry: layouts, contracts and supervisors come from one entry.

A toy framework (tests/launch/toyfw.py) registered by a test runs a real
launch whose ranks see its contract, and a workload spec follows the
registry for its pods.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.errors import InvalidSpec
from ringleader.launch import frameworks
from ringleader.launch.frameworks import LAUNCHER_RANK, WORKERS_ONLY
from ringleader.spec import RUNNABLE_FRAMEWORKS, Framework, WorkloadSpec
from tests.launch import toyfw

ROOT = Path(__file__).resolve().parents[1]

TOY_DUMP = "import json, os; print('TOY ' + json.dumps({k: v for k, v in os.environ.items() if k.startswith(('TOY_', 'RANK'))}))"


def _workload(framework: str, workers: int = 2, slots: int | None = None) -> WorkloadSpec:
    return WorkloadSpec.model_validate(
        {
            "name": "job",
            "projectId": "p",
            "spec": {
                "numWorkers": workers,
                "distributedFramework": framework,
                "slotsPerWorker": slots,
                "command": "true",
            },
        }
    )


def test_built_ins_are_registered_with_their_layouts_and_supervisors() -> None:
    assert frameworks.names()[:2] == ["pytorch", "mpi"]
    pytorch, mpi = frameworks.get("pytorch"), frameworks.get("mpi")
    assert pytorch.load_supervisor().__name__ == "Supervisor"
    assert mpi.load_supervisor().__name__ == "MPISupervisor"
    assert pytorch.pod_ranks(2, slots_per_worker=4) == [(0,), (1,), (2,)]
    assert mpi.pod_ranks(2, slots_per_worker=2) == [(LAUNCHER_RANK,), (0, 1), (2, 3)]
    assert pytorch.world_size(2, 4) == 3 and mpi.world_size(2, 2) == 4
    assert frameworks.by_spec_name("MPI") is mpi and frameworks.by_spec_name("TF") is None


def test_unknown_framework_names_the_flag_and_the_choices() -> None:
    with pytest.raises(InvalidSpec) as err:
        frameworks.get("tensorflow")
    assert err.value.where == "--framework" and "pytorch, mpi" in err.value.problem


def test_pod_layout_follows_the_registry() -> None:
    assert [p for p, _, _ in _workload("PyTorch").pod_layout("j")] == [
        "j-master-0",
        "j-worker-0",
        "j-worker-1",
    ]
    assert _workload("MPI").pod_layout("j")[0] == ("j-launcher", "launcher", 0)
    assert Framework.XGBOOST not in RUNNABLE_FRAMEWORKS
    toy = dataclasses.replace(toyfw.FRAMEWORK, name="toyxgb", spec_name="XGBoost")
    frameworks.register(toy)
    try:
        spec = _workload("XGBoost", workers=3, slots=2)
        assert spec.pod_layout("j") == [(f"j-worker-{i}", "worker", i) for i in range(3)]
        assert spec.registered_framework is toy and Framework.XGBOOST in RUNNABLE_FRAMEWORKS
        assert toy.pod_ranks(3, 2) == [(0, 1), (2, 3), (4, 5)]
    finally:
        frameworks.unregister("toyxgb")
    assert Framework.XGBOOST not in RUNNABLE_FRAMEWORKS
    assert [f.value for f in RUNNABLE_FRAMEWORKS] == ["PyTorch", "MPI"]


def test_a_registered_name_cannot_be_taken_twice() -> None:
    with pytest.raises(ValueError, match="clashes"):
        frameworks.register(frameworks.Framework(name="mpi2", summary="x", spec_name="MPI"))
    assert WORKERS_ONLY.pods("j", 1) == [("j-worker-0", "worker", 0)]


def test_toy_framework_runs_a_real_launch_with_its_contract() -> None:
    """`ringleader launch --framework toyfw` in a process that imported the plug-in."""
    entry = (
        "import sys, tests.launch.toyfw as toy; toy.register(); "
        "from ringleader.cli.main import app; app(sys.argv[1:])"
    )
    argv = [sys.executable, "-c", entry, "launch", "--framework", "toyfw", "-n", "2"]
    proc = subprocess.run(
        [*argv, "--no-prefix", "--", "python", "-c", TOY_DUMP],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    envs = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("TOY ")]
    assert sorted((e["TOY_RANK"], e["TOY_WORLD"]) for e in envs) == [("0", "2"), ("1", "2")]
    assert all(e["TOY_RANK"] == e["RANK"] and ":" in e["TOY_PEERS"] for e in envs)
    # Without the plug-in the name is unknown, and the message lists what is registered.
    plain = "import sys; from ringleader.cli.main import app; app(sys.argv[1:])"
    bad = subprocess.run(
        [*argv[:2], plain, *argv[3:], "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert bad.returncode == 2
    assert "--framework: unknown framework 'toyfw'; choose one of pytorch, mpi" in bad.stderr

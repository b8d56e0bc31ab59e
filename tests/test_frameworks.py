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
from ringleader.spec import RUNNABLE_FRAMEWORKS, WorkloadSpec
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
    assert frameworks.names() == ["pytorch", "mpi", "tf", "jax", "xgboost", "horovod"]
    pytorch, mpi = frameworks.get("pytorch"), frameworks.get("mpi")
    assert pytorch.load_supervisor().__name__ == "Supervisor"
    assert mpi.load_supervisor().__name__ == "MPISupervisor"
    assert pytorch.pod_ranks(2, slots_per_worker=4) == [(0,), (1,), (2,)]
    assert mpi.pod_ranks(2, slots_per_worker=2) == [(LAUNCHER_RANK,), (0, 1), (2, 3)]
    assert pytorch.world_size(2, 4) == 3 and mpi.world_size(2, 2) == 4
    assert frameworks.by_spec_name("MPI") is mpi
    assert frameworks.by_spec_name("TF") is frameworks.get("tf")
    assert frameworks.get("jax").world_size(3) == 3  # workers only
    assert [f.value for f in RUNNABLE_FRAMEWORKS] == ["PyTorch", "MPI", "TF", "XGBoost", "JAX"]
    horovod = frameworks.get("horovod")  # launch only: under the server, MPI workloads
    assert horovod.spec_name is None and horovod.rendezvous and horovod.world_size(2) == 2


def test_unknown_framework_names_the_flag_and_the_choices() -> None:
    with pytest.raises(InvalidSpec) as err:
        frameworks.get("tensorflow")
    assert err.value.where == "--framework"
    assert "pytorch, mpi, tf, jax, xgboost, horovod" in err.value.problem


def test_pod_layout_follows_the_registry() -> None:
    assert [p for p, _, _ in _workload("PyTorch").pod_layout("j")] == [
        "j-master-0",
        "j-worker-0",
        "j-worker-1",
    ]
    assert _workload("MPI").pod_layout("j")[0] == ("j-launcher", "launcher", 0)
    assert _workload("TF").pod_layout("j")[:2] == [("j-chief-0", "chief", 0),
                                                   ("j-worker-0", "worker", 0)]  # fmt: skip
    assert _workload("JAX").pod_layout("j") == [(f"j-worker-{i}", "worker", i) for i in range(2)]
    assert _workload("XGBoost").pod_layout("j")[0] == ("j-master-0", "master", 0)
    toy = dataclasses.replace(toyfw.FRAMEWORK, name="toyjax", spec_name="JAX")
    with pytest.raises(ValueError, match="clashes with 'jax'"):
        frameworks.register(toy)


def _place(rank: int, world: int, peers: tuple[str, ...]) -> frameworks.RankPlace:
    return frameworks.RankPlace(rank=rank, local_rank=rank, node_rank=0, world_size=world,
                                local_world_size=world, nnodes=1, master_addr="10.0.0.1",
                                master_port=29500, peers=peers)  # fmt: skip


def test_each_frameworks_contract_names_its_place_and_its_peers() -> None:
    peers = ("10.0.0.1:4001", "10.0.0.1:4002", "10.0.0.2:4003")
    tf = frameworks.get("tf").env
    configs = [json.loads(tf(_place(r, 3, peers))["TF_CONFIG"]) for r in range(3)]
    cluster = {"chief": ["10.0.0.1:4001"], "worker": ["10.0.0.1:4002", "10.0.0.2:4003"]}
    assert all(c["cluster"] == cluster for c in configs)
    assert [c["task"] for c in configs] == [{"type": "chief", "index": 0},
                                            {"type": "worker", "index": 0},
                                            {"type": "worker", "index": 1}]  # fmt: skip
    assert tf(_place(0, 1, peers[:1])) == {}  # alone: TensorFlow's own default
    assert frameworks.get("jax").env(_place(2, 3, peers)) == {
        "JAX_COORDINATOR_ADDRESS": "10.0.0.1:29500", "JAX_NUM_PROCESSES": "3",
        "JAX_PROCESS_ID": "2"}  # fmt: skip
    # MLX's ring is the default framework's (an MLX program runs under it), no other's.
    torch = frameworks.get("pytorch")
    placed = dataclasses.replace(_place(1, 3, peers), files_dir="/r/node-0/attempt-0")
    assert torch.env(placed) == {"MLX_RANK": "1",
                                 "MLX_HOSTFILE": "/r/node-0/attempt-0/mlx-hostfile.json"}  # fmt: skip
    assert json.loads(torch.files(peers, 3)["mlx-hostfile.json"]) == [[p] for p in peers]
    assert torch.files(peers[:1], 1) == {} and torch.env(_place(0, 1, peers[:1])) == {
        "MLX_RANK": "0"}  # fmt: skip
    assert "MLX_RANK" not in tf(placed) and frameworks.get("tf").files(peers, 3) == {}
    assert frameworks.get("xgboost").env(_place(1, 3, peers)) == {
        "DMLC_TRACKER_URI": "10.0.0.1", "DMLC_TRACKER_PORT": "29500",
        "DMLC_NUM_WORKER": "3", "DMLC_TASK_ID": "1"}  # fmt: skip


def test_a_frameworks_own_check_refuses_what_does_not_fit_it() -> None:
    fraction = _workload("XGBoost").model_copy(deep=True)
    fraction.spec.compute.gpu_portion_request = 0.5
    message, where = frameworks.get("xgboost").check(fraction)
    assert where == "spec.compute.gpuPortionRequest" and "whole GPUs" in message
    assert frameworks.get("xgboost").check(_workload("XGBoost")) is None
    assert frameworks.get("pytorch").check(fraction) is None


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
    assert all(e["TOY_RANK"] == e["RANK"] for e in envs)
    peers = {e["TOY_PEERS"] for e in envs}  # the same list for all, one port per rank
    assert len(peers) == 1 and len(set(peers.pop().split(","))) == 2, envs
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
    assert ("--framework: unknown framework 'toyfw'; choose one of pytorch, mpi, tf, jax, "
            "xgboost") in bad.stderr  # fmt: skip

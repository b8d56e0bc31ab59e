"""The Slurm backend's pure parts: its settings, the sbatch job planned for a workload
(golden), what it refuses before submission, and how the job places its launch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ringleader.errors import InvalidSpec
from ringleader.launch.detached import LaunchFile
from ringleader.launch.slurm_job import place
from ringleader.server.backends.base import BackendRequest, PodPlacement
from ringleader.server.backends.slurm.planning import SlurmSettings, check_fits, plan_job
from ringleader.slurm.nodes import SlurmNode
from ringleader.spec import WorkloadSpec

GOLDEN = Path(__file__).parent / "golden"
PY = "/opt/venv/bin/python"
RUN_DIR = "/shared/ringleader/runs/w0rk10ad1d"


def node(name: str, cpus: int = 4, memory_mb: int = 4000, gpus: int = 0) -> SlurmNode:
    return SlurmNode(name, cpus, memory_mb, gpus, "", "IDLE", "", ("debug",), "10.0.0.1")


NODES = [node("rl1"), node("rl2"), node("rl3")]


def spec(workers: int = 1, **fields: Any) -> WorkloadSpec:
    body = {"name": "mnist", "projectId": "vision", "spec": {"numWorkers": workers, **fields}}
    return WorkloadSpec.model_validate(body)


def request(workload: WorkloadSpec) -> BackendRequest:
    pods = [name for name, _, _ in workload.pod_layout("mnist")]
    return BackendRequest(
        workload_id="w0rk10ad1d",
        name="mnist",
        project="vision",
        spec=workload,
        run_dir=RUN_DIR,
        placements={p: PodPlacement("slurm:default", "slurm", cpu_cores=2.0) for p in pods},
        pod_env={"RINGLEADER_URL": "http://head:8470", "RINGLEADER_TOKEN": "pod-token"},
    )


def test_settings_read_the_partition_accounts_and_time() -> None:
    settings = SlurmSettings.parse("gpu,account=ml,account.vision=cv-lab,time=2:00:00")
    assert settings.partition == "gpu" and settings.time == "2:00:00"
    assert settings.account_for("vision") == "cv-lab"
    assert settings.account_for("nlp") == "ml"
    assert SlurmSettings.parse("debug").account_for("vision") is None
    for bad, words in (
        ("", "name the partition"),
        ("debug,colour=blue", "unknown option 'colour'"),
        ("debug,time=soon", "--time"),
        ("debug,account", "is not KEY=VALUE"),
        ("deb ug", "the partition"),
    ):
        with pytest.raises(InvalidSpec, match=words) as caught:
            SlurmSettings.parse(bad)
        assert caught.value.where == "--backend"


def test_a_two_pod_workload_is_one_job_on_two_nodes_golden() -> None:
    """master + 1 worker -> 2 nodes, one task each, the pod's compute per node, the
    project's account, requeue on preemption; the job runs the backend's in-job step."""
    workload = spec(
        1,
        command="python -m ringleader.examples.digits --epochs 2",
        compute={"cpuCoreRequest": 2, "cpuMemoryLimit": "1Gi"},
    )
    settings = SlurmSettings.parse("debug,account=ml,account.vision=cv-lab,time=1:00:00")
    plan = plan_job(request(workload), settings, NODES, python=PY, grace_s=5.0)
    assert plan.script == (GOLDEN / "backend_job.sbatch").read_text()
    launch = LaunchFile.from_json(json.loads(json.dumps(plan.launch.to_json())))
    assert [(h.ssh, h.slots) for h in launch.spec.hosts] == [
        ("slurm-node-0", 1),
        ("slurm-node-1", 1),
    ]
    assert launch.spec.env["RINGLEADER_CHECKPOINT_DIR"] == f"{RUN_DIR}/checkpoints"
    assert launch.spec.env["RUNAI_JOB_NAME"] == "mnist"
    for rank in ("0", "1"):
        env = launch.spec.rank_env[rank]
        assert "CUDA_VISIBLE_DEVICES" not in env  # Slurm binds the devices
        assert env["RUNAI_NUM_OF_GPUS"] == "0" and env["OMP_NUM_THREADS"] == "2"
    assert "pod-token" not in plan.script  # the pods' token stays in the run dir


def test_refused_before_submission_with_the_field_named() -> None:
    cases = [
        (spec(3), "spec.numWorkers", "4 pods need 4 nodes"),
        (spec(1, compute={"gpuDevicesRequest": 1}), "spec.compute.gpuDevicesRequest",
         "partition debug has no GPUs"),
        (spec(1, compute={"cpuCoreRequest": 8}), "spec.compute.cpuCoreRequest",
         "the most one has: 4"),
        (spec(1, compute={"cpuMemoryRequest": "8G"}), "spec.compute.cpuMemoryRequest",
         "MiB of memory"),
        (spec(1, compute={"gpuPortionRequest": 0.5}), "spec.compute.gpuPortionRequest",
         "whole GPUs"),
    ]  # fmt: skip
    for workload, where, words in cases:
        with pytest.raises(InvalidSpec, match=words) as caught:
            check_fits(workload, "debug", NODES)
        assert caught.value.where == where
    with pytest.raises(InvalidSpec) as caught:
        check_fits(spec(1, distributedFramework="MPI"), "debug", NODES)
    assert caught.value.where == "spec.distributedFramework"
    gpus = [node("g1", gpus=2), node("g2", gpus=2)]
    check_fits(spec(1, compute={"gpuDevicesRequest": 2}), "gpu", gpus)  # fits: no error


def test_the_job_places_its_launch_on_the_allocation() -> None:
    plan = plan_job(request(spec(1, command="true")), SlurmSettings("debug"), NODES,
                    python=PY, grace_s=5.0)  # fmt: skip
    placed = place(plan.launch, "42", ["rl2", "rl3"], ["10.0.0.2", "10.0.0.3"])
    assert [(h.ssh, h.address, h.slots) for h in placed.spec.hosts] == [
        ("rl2", "10.0.0.2", 1),
        ("rl3", "10.0.0.3", 1),
    ]
    assert placed.spec.slurm_job == "42"
    assert [placed.spec.rank_env[r]["NODE_NAME"] for r in ("0", "1")] == ["rl2", "rl3"]
    assert place(placed, "43", ["rl1"], ["10.0.0.1"]) is placed  # placed already: kept
    with pytest.raises(InvalidSpec, match="1 node"):
        place(plan.launch, "44", ["rl1"], ["10.0.0.1"])


def test_one_slurm_backend_per_server() -> None:
    from ringleader.server.backends import BackendChoice, BackendSet

    choices = [BackendChoice.parse("slurm:debug@cpu"), BackendChoice.parse("slurm:gpu@a100")]
    with pytest.raises(InvalidSpec, match="given twice with different arguments") as caught:
        BackendSet(choices)
    assert caught.value.where == "--backend"

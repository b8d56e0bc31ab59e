"""Rows and specs as the scheduler sees them; node inventories; the pod env (pure)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from ringleader import sched
from ringleader.errors import InvalidSpec
from ringleader.server.inventory import inventory_file, simulated_nodes
from ringleader.server.models import Project, Workload
from ringleader.server.snapshot import pod_requests, preemptible, priority, to_sched_project
from ringleader.spec import WorkloadSpec


def spec(**fields: object) -> WorkloadSpec:
    body = {"name": "w", "projectId": "p", "spec": {"command": "true", "numWorkers": 2, **fields}}
    return WorkloadSpec.model_validate(body)


def test_portion_memory_and_whole_gpu_requests() -> None:
    half = pod_requests(spec(compute={"gpuPortionRequest": 0.5, "gpuRequestType": "portion"}), "w")
    assert [(r.gpu_devices, r.gpu_portion) for r in half] == [(1, 0.5)] * 3
    memory = pod_requests(spec(compute={"gpuRequestType": "memory", "gpuMemoryRequest": "4G"}), "w")
    assert {(r.gpu_devices, r.gpu_memory_bytes) for r in memory} == {(1, 4 * 10**9)}
    whole = pod_requests(spec(compute={"gpuDevicesRequest": 2, "cpuCoreRequest": 1.5,
                                       "cpuMemoryRequest": "1Gi"}), "w")  # fmt: skip
    assert [(r.name, r.gpu_devices, r.gpu_portion, r.cpu_cores, r.memory_bytes) for r in whole] == [
        ("w-master-0", 2, None, 1.5, 2**30),
        ("w-worker-0", 2, None, 1.5, 2**30),
        ("w-worker-1", 2, None, 1.5, 2**30),
    ]


def test_an_mpi_launcher_asks_for_no_gpu_unless_it_has_its_own_spec() -> None:
    mpi = spec(distributedFramework="MPI", compute={"gpuDevicesRequest": 1})
    assert [(r.name, r.gpu_devices) for r in pod_requests(mpi, "w")] == [
        ("w-launcher", 0), ("w-worker-0", 1), ("w-worker-1", 1)
    ]  # fmt: skip


def test_priority_and_preemptibility_follow_run_ai_defaults() -> None:
    assert (priority(spec()), preemptible(spec())) == (sched.TRAIN, None)
    assert priority(spec(interactive=True)) == sched.BUILD  # non-preemptible by default
    assert priority(spec(priorityClass="inference")) == sched.INFERENCE
    assert preemptible(spec(preemptibility="non-preemptible")) is False


def test_project_quotas_map_to_the_scheduler_and_no_quota_means_unlimited() -> None:
    free = to_sched_project(Project(name="default", resources=[]), ["default", "a100"])
    assert free.quota("a100").gpu.deserved is None  # any amount is in quota
    team = Project(
        name="team-a",
        resources=[{"nodePool": "default", "gpu": {"deserved": 2, "limit": 4, "overQuotaWeight": 3},
                    "cpu": {"deserved": 0, "limit": None}, "memory": {"deserved": 1000}}],
    )  # fmt: skip
    quota = to_sched_project(team, ["default"]).quota("default")
    assert (quota.gpu.deserved, quota.gpu.limit, quota.gpu.over_quota_weight) == (2, 4, 3)
    assert quota.cpu.deserved is None  # CPU quota off until set
    assert quota.memory.deserved == 1000 * 10**6  # the API's memory is in MB
    assert to_sched_project(team, ["default"]).quota("other").gpu.deserved == 0


def test_simulated_node_groups() -> None:
    nodes = simulated_nodes("2x8gpu, 1x4gpu:40G@l4")
    assert [(n.name, n.pool, len(n.gpus)) for n in nodes] == [
        ("sim-0", "default", 8), ("sim-1", "default", 8), ("sim-2", "l4", 4)
    ]  # fmt: skip
    assert nodes[2].gpus[0]["memoryBytes"] == 40 * 10**9 and nodes[0].kind == "simulated"
    for bad in ("4x8", "0x8gpu", "x8gpu", "2x8gpu:lots"):
        with pytest.raises(InvalidSpec, match="--simulate-nodes"):
            simulated_nodes(bad)


def test_a_yaml_inventory_names_the_line_of_a_bad_node(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "- name: big-1\n  gpus: 8\n  gpuMemory: 80G\n  pool: a100\n  labels: {rack: r1}\n"
    )
    (node,) = inventory_file(good)
    assert (node.name, node.pool, len(node.gpus), node.labels) == (
        "big-1",
        "a100",
        8,
        {"rack": "r1"},
    )
    cases = {
        "nodes:\n  - name: a\n  - name: B\n": ":3",  # a bad name, on line 3
        "- name: a\n- name: b\n  colour: red\n": ":2",  # an unknown field
        "- name: a\n  gpus: [1\n": ":",  # not YAML
        "- name: a\n- name: a\n": "twice",
    }
    for text, where in cases.items():
        path = tmp_path / "bad.yaml"
        path.write_text(text)
        with pytest.raises(InvalidSpec) as caught:
            inventory_file(path)
        assert where in str(caught.value) and str(path) in str(caught.value), text


def test_pods_get_whole_cores_of_their_own_or_none() -> None:
    from ringleader.server.backends.pod_env import assign_cores

    wanted = {"a": 2.5, "b": 0.5, "c": 1, "d": 2}
    assert assign_cores(wanted, (0, 1, 2, 3), frozenset({1})) == {"a": (0, 2), "c": (3,)}


def test_a_rank_is_pinned_to_its_cores_where_the_os_allows() -> None:
    import os
    import subprocess
    import sys

    from ringleader.launch.rank_process import pin

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        mine = sorted(os.sched_getaffinity(0))
        assert pin(child.pid, str(mine[-1]))
        assert os.sched_getaffinity(child.pid) == {mine[-1]}
        assert not pin(child.pid, "9999")  # no such core here: left as it was
        assert os.sched_getaffinity(child.pid) == {mine[-1]}
    finally:
        child.kill()
        child.wait()


def test_a_pods_gpu_share_is_its_portion_or_its_memory_over_the_device() -> None:
    from ringleader.runtime.dist import gpu_share

    assert gpu_share({}, 80 * 10**9) is None  # a whole device: no cap
    assert gpu_share({"RINGLEADER_GPU_FRACTION": "0.25"}, 80 * 10**9) == 0.25
    memory = {"RINGLEADER_GPU_MEMORY_BYTES": str(20 * 10**9), "RINGLEADER_GPU_FRACTION": "0.5"}
    assert gpu_share(memory, 80 * 10**9) == 0.25  # memory wins, over this device's size
    assert gpu_share({"RINGLEADER_GPU_MEMORY_BYTES": str(10**12)}, 80 * 10**9) == 1.0


def test_a_gpu_memory_request_alone_asks_for_device_memory() -> None:
    (pod, *_) = pod_requests(spec(compute={"gpuMemoryRequest": "20G"}), "w")
    assert (pod.gpu_devices, pod.gpu_memory_bytes, pod.gpu_portion) == (1, 20 * 10**9, None)


def test_inventory_field_errors_name_the_field(tmp_path: Path) -> None:
    for text, field in (
        ("- name: a\n  gpus: eight\n", "gpus"),
        ("- name: a\n  gpus: 2.9\n", "gpus"),
        ("- name: a\n  memory: 0G\n", "memory"),
        ("- name: a\n  pool: Bad Pool!\n", "pool"),
    ):
        path = tmp_path / "nodes.yaml"
        path.write_text(text)
        with pytest.raises(InvalidSpec, match=f"node a: {field}"):
            inventory_file(path)


def rows(phase: str, pod_phases: list[str]) -> Workload:
    from ringleader.server.models import Pod

    w = Workload(
        id="w1",
        name="w",
        project_id="p",
        phase=phase,
        spec=spec(compute={"gpuDevicesRequest": 1}).model_dump(mode="json", by_alias=True),
        framework="PyTorch",
        created_at=datetime.now(timezone.utc),
    )
    names = ["w-master-0", "w-worker-0", "w-worker-1"]
    w.pods = [
        Pod(name=n, role="worker", index=i, node="sim-0", phase=ph, gpus=[{"index": i}])
        for i, (n, ph) in enumerate(zip(names, pod_phases, strict=True))
    ]
    return w


def test_a_gang_being_restarted_keeps_its_gpus_and_lingering_pods_keep_theirs() -> None:
    from ringleader.server.models import Node
    from ringleader.server.snapshot import to_sched_workload

    nodes = {"sim-0": Node(name="sim-0", gpus=[{"index": i} for i in range(4)])}
    restarting = to_sched_workload(rows("Running", ["Failed", "Stopped", "Pending"]), "p", nodes)
    assert restarting is not None and len(restarting.bindings) == 3  # none of them is free
    lingering = to_sched_workload(rows("Completed", ["Succeeded", "Running", "Failed"]), "p", nodes)
    assert lingering is not None and [b.pod for b in lingering.bindings] == ["w-worker-0"]
    assert lingering.preemptible is False  # done: what still runs is not preempted
    assert to_sched_workload(rows("Stopped", ["Stopped"] * 3), "p", nodes) is None

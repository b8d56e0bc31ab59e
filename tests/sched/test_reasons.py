"""Pending reasons name the project, the numbers and the node, so a user knows what to change."""

from __future__ import annotations

from dataclasses import replace

from ringleader.sched import (
    BUILD,
    Department,
    Gpu,
    GpuShare,
    Limits,
    Node,
    PodBinding,
    PodRequest,
    PoolQuota,
    Project,
    Quota,
    Snapshot,
    Workload,
    schedule,
)
from tests.sched.helpers import GiB, binding, bound_nodes, gpu_node, job, project


def reason(snapshot: Snapshot, workload: str) -> str:
    text = schedule(snapshot).pending_reason(workload)
    assert text is not None, f"{workload} was placed"
    return text


def test_whole_gpus_name_the_best_node_and_its_free_count() -> None:
    nodes = tuple(gpu_node(f"node-{i}", 4) for i in range(1, 8))
    running = tuple(
        replace(job(f"r{i}", "other"), bindings=(binding(f"r{i}-0", f"node-{i}", 0, 1),))
        for i in range(1, 7)
    )
    busy7 = replace(job("r7", "other"), bindings=(binding("r7-0", "node-7", 0),))
    snapshot = Snapshot(
        nodes=nodes,
        projects=(project("team-a", 8), project("other", 28)),
        workloads=(*running, busy7, job("w", "team-a", gpus=4)),
    )
    assert reason(snapshot, "w") == (
        "needs 4 whole GPUs on one node in pool default; the most free on any node is 3 (node-7)"
    )


def test_a_request_larger_than_any_node_names_the_largest() -> None:
    snapshot = Snapshot(
        nodes=(gpu_node("small", 2), gpu_node("big", 8)),
        projects=(project("a", 16),),
        workloads=(job("w", "a", gpus=16),),
    )
    assert reason(snapshot, "w") == (
        "needs 16 whole GPUs on one node in pool default; the largest node has 8 (big)"
    )


def test_fractions_name_the_device_with_the_most_room() -> None:
    held = PodBinding("r-0", "node-1", (GpuShare(0, 0.75),))
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 1),),
        projects=(project("a", 1),),
        workloads=(
            replace(job("r", "a", portion=0.75), bindings=(held,)),
            job("w", "a", portion=0.5, at=1),
        ),
    )
    assert reason(snapshot, "w") == (
        "needs 0.5 of a GPU on one node in pool default; "
        "the largest free share of any GPU is 0.25 (node-1 GPU 0)"
    )


def test_cpu_and_memory_shortages_name_the_node() -> None:
    nodes = (Node("cpu-1", cpu_cores=8, memory_bytes=32 * GiB),)
    snapshot = Snapshot(
        nodes=nodes,
        projects=(project("a"),),
        workloads=(
            replace(job("r", "a", gpus=0, cpu=6), bindings=(binding("r-0", "cpu-1"),)),
            job("cpu", "a", gpus=0, cpu=4, at=1),
        ),
    )
    assert reason(snapshot, "cpu") == (
        "needs 4 CPU cores on one node in pool default; the most free on any node is 2 (cpu-1)"
    )


def test_gang_reason_says_how_many_pods_fit() -> None:
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 4), gpu_node("node-2", 3), gpu_node("node-3", 1)),
        projects=(project("a", 8),),
        workloads=(job("gang", "a", gpus=4, pods=2),),
    )
    assert reason(snapshot, "gang") == (
        "a gang of 2 pods needs 4 whole GPUs per pod in pool default; "
        "1 of 2 fit, then the most free on any node is 3 (node-2)"
    )


def test_gang_larger_than_the_free_pool_gives_the_totals() -> None:
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 4), gpu_node("node-2", 2)),
        projects=(project("a", 8),),
        workloads=(job("gang", "a", gpus=2, pods=4),),
    )
    assert reason(snapshot, "gang") == (
        "a gang of 4 pods needs 2 whole GPUs per pod, 8 whole GPUs in all in pool default; 6 free"
    )


def test_limits_name_the_project_or_department_and_the_figures() -> None:
    projects = (
        Project("team-a", {"default": PoolQuota(gpu=Quota(1, 2))}),
        Project("team-b", {"default": PoolQuota(gpu=Quota(8))}, "research"),
    )
    running = replace(job("r", "team-b", gpus=3), bindings=(binding("r-0", "node-1", 0, 1, 2),))
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 8),),
        projects=projects,
        departments=(Department("research", {"default": Limits(gpu=4)}),),
        workloads=(running, job("a", "team-a", gpus=3), job("b", "team-b", gpus=2, at=1)),
    )
    assert reason(snapshot, "a") == (
        "project team-a would pass its GPU limit: this needs 3, 0 of 2 in use"
    )
    assert reason(snapshot, "b") == (
        "department research would pass its GPU limit: this needs 2, 3 of 4 in use"
    )


def test_memory_limit_reads_in_binary_units() -> None:
    projects = (Project("a", {"default": PoolQuota(memory=Quota(None, 16 * GiB))}),)
    running = replace(job("r", "a", gpus=0), bindings=(binding("r-0", "node-1"),))
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 0),),
        projects=projects,
        workloads=(
            replace(running, pods=(replace(running.pods[0], memory_bytes=16 * GiB),)),
            job("w", "a", gpus=0, at=1),
        ),
    )
    assert reason(snapshot, "w") == "project a is at its memory limit (16 GiB of 16 GiB)"


def test_non_preemptible_over_quota_names_the_deserved_quota() -> None:
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 8),),
        projects=(Project("team-a", {"default": PoolQuota(gpu=Quota(4), cpu=Quota(2))}),),
        workloads=(job("nb", "team-a", gpus=1, cpu=3, priority=BUILD),),
    )
    assert reason(snapshot, "nb") == (
        "non-preemptible work must fit in deserved quota: "
        "project team-a would use 3 of its 2 deserved CPU cores in pool default"
    )


def test_several_pools_give_a_reason_for_each() -> None:
    nodes = (
        Node("a-1", 8, 64 * GiB, (Gpu(0, 80 * GiB),), pool="a100"),
        Node("v-1", 8, 64 * GiB, (Gpu(0, 16 * GiB),), pool="v100", ready=False),
    )
    quotas = {"a100": PoolQuota(gpu=Quota(4)), "v100": PoolQuota(gpu=Quota(4))}
    snapshot = Snapshot(
        nodes=nodes,
        projects=(Project("p", quotas),),
        workloads=(job("w", "p", gpus=2, node_pools=("a100", "v100")),),
    )
    assert reason(snapshot, "w") == (
        "pool a100: needs 2 whole GPUs on one node in pool a100; the largest node has 1 (a-1); "
        "pool v100: no ready node in pool v100 (1 not ready)"
    )


def test_an_empty_cluster_says_so() -> None:
    snapshot = Snapshot(projects=(project("a", 1),), workloads=(job("w", "a"),))
    assert reason(snapshot, "w") == "no node in pool default"


def test_a_mixed_gang_names_its_pod_and_each_workload_gets_its_own_reason() -> None:
    def mixed(wid: str) -> Workload:
        return Workload(
            wid,
            "a",
            (PodRequest(f"{wid}-master", cpu_cores=1), PodRequest(f"{wid}-worker", gpu_devices=4)),
        )

    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 2),),
        projects=(project("a", 8),),
        workloads=(mixed("x"), mixed("y")),
    )
    decisions = schedule(snapshot)
    for wid in ("x", "y"):
        assert decisions.pending_reason(wid) == (
            f"pod {wid}-worker of a gang of 2 needs 4 whole GPUs on one node in pool default; "
            "the largest node has 2 (node-1)"
        )


def _in_image(workload: Workload) -> Workload:
    return replace(workload, pods=tuple(replace(p, image=True) for p in workload.pods))


def test_image_pods_go_only_to_nodes_with_a_container_runtime_and_say_so() -> None:
    """A node whose probe found no podman or docker gets no image pods; where no node
    of the pool has one, the reason says so (not a shortage of GPUs)."""
    bare = replace(gpu_node("bare", 8), runs_images=False)
    snapshot = Snapshot(
        nodes=(bare, gpu_node("podman", 2)),
        projects=(project("a", 16),),
        workloads=(_in_image(job("img", "a", gpus=1, pods=2)), job("proc", "a", gpus=4)),
    )
    decisions = schedule(snapshot)
    assert bound_nodes(decisions, "img") == ["podman", "podman"]
    assert bound_nodes(decisions, "proc") == ["bare"]  # process pods go anywhere
    alone = replace(snapshot, nodes=(bare,), workloads=(_in_image(job("img", "a")),))
    assert reason(alone, "img") == (
        "its pods run in a container image, and no ready node in pool default has a "
        "container runtime (podman or docker; `ringleader nodes list` shows each node's)"
    )
    # Another project's gang of the same requests is told the same, and no name of ours.
    two = replace(alone, projects=(project("a", 16), project("b", 16)),
                  workloads=(_in_image(job("img", "a")), _in_image(job("other", "b"))))  # fmt: skip
    assert "img" not in reason(two, "other")

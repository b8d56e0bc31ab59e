"""Builders for scheduler snapshots, and a loop that applies decisions.

``settle`` plays the server's part: it applies a cycle's decisions
(preempted workloads lose their bindings and go back to pending, placements
become bindings) and runs the next cycle, until a cycle changes nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ringleader.sched import (
    Decisions,
    Gpu,
    GpuShare,
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

GiB = 1024**3


def gpu_node(
    name: str,
    gpus: int = 8,
    pool: str = "default",
    *,
    cpu_cores: float = 64.0,
    memory_bytes: int = 512 * GiB,
    ready: bool = True,
) -> Node:
    """A node of ``gpus`` 80 GiB devices."""
    devices = tuple(Gpu(i, 80 * GiB) for i in range(gpus))
    return Node(name, cpu_cores, memory_bytes, devices, pool, ready=ready)


def project(
    name: str,
    gpu: float = 0,
    limit: float | None = None,
    weight: float = 1.0,
    pool: str = "default",
    department: str | None = None,
) -> Project:
    return Project(name, {pool: PoolQuota(gpu=Quota(gpu, limit, weight))}, department)


def job(
    wid: str,
    proj: str,
    gpus: int = 1,
    pods: int = 1,
    *,
    at: float = 0.0,
    portion: float | None = None,
    gpu_memory: int | None = None,
    cpu: float = 1.0,
    **kw: object,
) -> Workload:
    devices = 1 if (portion or gpu_memory) else gpus
    requests = tuple(
        PodRequest(
            f"{wid}-{i}",
            cpu_cores=cpu,
            memory_bytes=GiB,
            gpu_devices=devices,
            gpu_portion=portion,
            gpu_memory_bytes=gpu_memory,
        )
        for i in range(pods)
    )
    return Workload(wid, proj, requests, submitted_at=at, **kw)  # type: ignore[arg-type]


def apply(snapshot: Snapshot, decisions: Decisions) -> Snapshot:
    """The snapshot after the server carried out ``decisions``."""
    preempted = set(decisions.preempted())
    placed = {p.workload: p.pods for p in decisions.placements}
    workloads = []
    for w in snapshot.workloads:
        if w.id in preempted:
            w = replace(w, bindings=())
        if w.id in placed:
            w = replace(w, bindings=w.bindings + placed[w.id])
        workloads.append(w)
    return replace(snapshot, workloads=tuple(workloads))


def settle(snapshot: Snapshot, max_cycles: int = 20) -> Snapshot:
    """Run cycles until one places and preempts nothing."""
    for _ in range(max_cycles):
        decisions = schedule(snapshot)
        if not decisions.placements and not decisions.preemptions:
            return snapshot
        snapshot = apply(snapshot, decisions)
    raise AssertionError(f"no stable state after {max_cycles} cycles")


def gpus_by_project(snapshot: Snapshot) -> Counter[str]:
    """Allocated GPU devices (shares summed) per project."""
    used: Counter[str] = Counter()
    for w in snapshot.workloads:
        for b in w.bindings:
            used[w.project] += sum(g.share for g in b.gpus)
    return used


def bound_nodes(decisions: Decisions, workload: str) -> list[str]:
    placement = decisions.placement(workload)
    assert placement is not None, decisions.pending_reason(workload)
    return [p.node for p in placement.pods]


def binding(pod: str, node: str, *indices: int) -> PodBinding:
    return PodBinding(pod, node, tuple(GpuShare(i) for i in indices))

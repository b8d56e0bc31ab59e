"""Node views: what the API (``GET /api/v1/nodes``) and the web UI's nodes page show
of each node, as ``schemas.NodeOut``.

Allocation is what the scheduler bound (requests, not measured use): the pods
that hold resources on each node, their GPUs (fractions as fractions, per
device), CPU cores and memory.  The amounts count everyone's pods (capacity is
shared); the pod names only those of projects the caller may see.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from ringleader.errors import NotFound
from ringleader.sched.model import PodRequest
from ringleader.server import node_kinds
from ringleader.server.models import Node, Pod, User, Workload
from ringleader.server.schemas import NodeGpuOut, NodeOut
from ringleader.server.services.workloads import findable, visible_projects
from ringleader.server.snapshot import holding, holds, pod_asks


def nodes(session: Session, user: User, held: list[HeldPod] | None = None) -> list[NodeOut]:
    """Every node, its resources and what the scheduler has allocated on it;
    ``held``: ``held_pods``' answer when the caller has read it already."""
    rows = list(session.scalars(select(Node).order_by(Node.pool, Node.name)))
    usage = _usage(held if held is not None else held_pods(session, user))
    return [_node_out(n, usage.get(n.name)) for n in rows]


def node(session: Session, user: User, name: str) -> NodeOut:
    """One node by name (404 otherwise)."""
    row = session.scalar(select(Node).where(Node.name == name)) if findable(name) else None
    if row is None:
        raise NotFound("node", name)
    return _node_out(row, _usage(held_pods(session, user)).get(name))


@dataclass(frozen=True)
class HeldPod:
    """A pod holding resources on its node; ``named``: of a project the caller may
    see (only those are named; the amounts count everyone's, capacity is shared)."""

    workload: Workload
    pod: Pod
    named: bool


def held_pods(session: Session, user: User) -> list[HeldPod]:
    """Every pod that holds resources now, in one query (its workload's project
    loaded: the nodes page names it)."""
    visible = None if user.is_admin else set(session.scalars(visible_projects(session, user)))
    rows = session.scalars(
        select(Workload)
        .options(selectinload(Workload.pods), selectinload(Workload.project))
        .where(holding())
    )
    return [
        HeldPod(row, pod, visible is None or row.project_id in visible)
        for row in rows
        for pod in sorted(row.pods, key=lambda p: p.name)
        if holds(row, pod)
    ]


class _Usage:
    def __init__(self) -> None:
        self.cpu = 0.0
        self.memory = 0
        self.gpu_shares: dict[int, float] = defaultdict(float)
        self.pods: list[str] = []


def _usage(held: list[HeldPod]) -> dict[str, _Usage]:
    """Allocation per node; pod names only of visible projects."""
    usage: dict[str, _Usage] = defaultdict(_Usage)
    asks: dict[str, dict[str, PodRequest]] = {}
    for item in held:
        row, pod = item.workload, item.pod
        if row.id not in asks:
            asks[row.id] = {r.name: r for r in pod_asks(row).requests}
        on = usage[pod.node]
        if item.named:
            on.pods.append(pod.name)
        request = asks[row.id].get(pod.name)
        if request is not None:
            on.cpu += request.cpu_cores
            on.memory += request.memory_bytes
        for gpu in pod.gpus or []:
            on.gpu_shares[int(gpu["index"])] += float(gpu.get("share", 1.0))
    return usage


def _node_out(row: Node, usage: _Usage | None) -> NodeOut:
    usage = usage or _Usage()
    gpus = [
        NodeGpuOut(
            index=int(g["index"]),
            memory_bytes=int(g.get("memoryBytes") or 0),
            model=g.get("model"),
            simulated=bool(g.get("simulated")) or row.kind == node_kinds.SIMULATED,
            allocated=round(usage.gpu_shares.get(int(g["index"]), 0.0), 6),
        )
        for g in row.gpus
    ]
    return NodeOut(
        name=row.name,
        kind=row.kind,
        simulated=row.kind == node_kinds.SIMULATED,
        pool=row.pool,
        address=row.address,
        status="Ready" if row.ready else "NotReady",
        message=row.message,
        labels=row.labels or {},
        cpu_cores=row.cpu_cores,
        memory_bytes=row.memory_bytes,
        gpus=gpus,
        gpu_count=len(gpus),
        allocated_gpus=round(math.fsum(g.allocated for g in gpus), 6),
        allocated_cpu_cores=usage.cpu,
        allocated_memory_bytes=usage.memory,
        pods=sorted(usage.pods),
        ssh=row.ssh,
        facts=row.facts or {},
    )

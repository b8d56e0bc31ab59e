"""Nodes with their allocation: what ``nodes list``, ``top node`` and the API show;
and the registration of SSH nodes (``nodes add``, ``nodes remove``).

Allocation is what the scheduler bound (requests, not measured use): the
pods that hold resources on each node, their GPUs (fractions as fractions,
per device), CPU cores and memory.

Only admins register or remove nodes (they decide where everyone's code
runs).  Local and simulated nodes come from the server's flags and are not
removed through the API.
"""

from __future__ import annotations

import math
from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from ringleader.errors import Conflict, NotFound
from ringleader.hosts import ssh_host
from ringleader.server.models import Node, Pod, User, Workload
from ringleader.server.scheduling import asks, holding, holds
from ringleader.server.schemas import NodeGpuOut, NodeIn, NodeOut
from ringleader.server.services.projects import require_admin
from ringleader.server.services.workloads import visible_projects
from ringleader.server.ssh_nodes import NodeState


def node_name(body: NodeIn) -> str:
    """The name given, else the ssh target's host part (``user@gpu1`` -> ``gpu1``)."""
    return body.name or ssh_host(body.ssh)


def check_new_node(session: Session, user: User, body: NodeIn) -> None:
    """Before the probe: may ``user`` add it, and is its name free?"""
    require_admin(user, "register nodes")
    name = node_name(body)
    if session.scalar(select(Node.kind).where(Node.name == name)) is not None:
        raise Conflict(f"a node named {name!r} is already registered; `nodes remove` it first")


def add_node(session: Session, body: NodeIn, state: NodeState) -> Node:
    """Store a probed SSH node (the name's uniqueness is the index's at commit)."""
    node = Node(
        name=node_name(body),
        kind="ssh",
        pool=body.pool,
        ssh=body.ssh,
        address=body.address or ssh_host(body.ssh),
        cpu_cores=state.cpu_cores,
        memory_bytes=state.memory_bytes,
        gpus=state.gpus,
        labels=dict(body.labels),
        ready=state.ready,
        message=state.message,
        facts=state.facts,
    )
    session.add(node)
    session.flush()
    return node


def remove_node(session: Session, user: User, name: str) -> None:
    """Unregister an SSH node that no live workload holds."""
    require_admin(user, "remove nodes")
    node = session.scalar(select(Node).where(Node.name == name)) if "\x00" not in name else None
    if node is None:
        raise NotFound("node", name)
    if node.kind != "ssh":
        raise Conflict(
            f"node {name!r} is {node.kind}: it comes from the server's flags "
            "(--simulate-nodes, --nodes-file, --no-local-node), not from `nodes add`"
        )
    held = session.scalars(
        select(Workload.name)
        .join(Pod, Pod.workload_id == Workload.id)
        .where(holding(), Pod.node == name)
        .distinct()
    ).all()
    if held:
        raise Conflict(
            f"node {name!r} runs workloads {', '.join(sorted(held))}: "
            "delete or suspend them first (or wait until they end)"
        )
    session.delete(node)


def list_nodes(session: Session, user: User) -> list[NodeOut]:
    nodes = list(session.scalars(select(Node).order_by(Node.pool, Node.name)))
    usage = _usage(session, user)
    return [_out(n, usage.get(n.name)) for n in nodes]


def get_node(session: Session, user: User, name: str) -> NodeOut:
    node = session.scalar(select(Node).where(Node.name == name)) if "\x00" not in name else None
    if node is None:
        raise NotFound("node", name)
    return _out(node, _usage(session, user).get(name))


class _Usage:
    def __init__(self) -> None:
        self.cpu = 0.0
        self.memory = 0
        self.gpu_shares: dict[int, float] = defaultdict(float)
        self.pods: list[str] = []


def _usage(session: Session, user: User) -> dict[str, _Usage]:
    """Allocation per node; pod names only of projects ``user`` may see (the
    amounts count everyone's: capacity is shared)."""
    visible = None if user.is_admin else set(session.scalars(visible_projects(session, user)))
    rows = session.scalars(select(Workload).options(selectinload(Workload.pods)).where(holding()))
    usage: dict[str, _Usage] = defaultdict(_Usage)
    for workload in rows:
        requests = {r.name: r for r in asks(workload).requests}
        for pod in workload.pods:
            if not holds(workload, pod):
                continue
            node = usage[pod.node]
            if visible is None or workload.project_id in visible:
                node.pods.append(pod.name)
            request = requests.get(pod.name)
            if request is not None:
                node.cpu += request.cpu_cores
                node.memory += request.memory_bytes
            for gpu in pod.gpus or []:
                node.gpu_shares[int(gpu["index"])] += float(gpu.get("share", 1.0))
    return usage


def _out(node: Node, usage: _Usage | None) -> NodeOut:
    usage = usage or _Usage()
    gpus = [
        NodeGpuOut(
            index=int(g["index"]),
            memory_bytes=int(g.get("memoryBytes") or 0),
            model=g.get("model"),
            simulated=bool(g.get("simulated")) or node.kind == "simulated",
            allocated=round(usage.gpu_shares.get(int(g["index"]), 0.0), 6),
        )
        for g in node.gpus
    ]
    return NodeOut(
        name=node.name,
        kind=node.kind,
        simulated=node.kind == "simulated",
        pool=node.pool,
        address=node.address,
        status="Ready" if node.ready else "NotReady",
        message=node.message,
        labels=node.labels or {},
        cpu_cores=node.cpu_cores,
        memory_bytes=node.memory_bytes,
        gpus=gpus,
        gpu_count=len(gpus),
        allocated_gpus=round(math.fsum(g.allocated for g in gpus), 6),
        allocated_cpu_cores=usage.cpu,
        allocated_memory_bytes=usage.memory,
        pods=sorted(usage.pods),
        ssh=node.ssh,
        facts=node.facts or {},
    )

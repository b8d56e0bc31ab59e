"""What the projects and nodes pages show beyond the API's views: each
project's usage and fair share per node pool, and who holds each GPU.

Why here and not in ``views``: the API does not expose fair share (the
scheduler works it out afresh each cycle); the page works it out with the
scheduler's own code (``load_snapshot`` -> ``CycleState`` -> ``fair_shares``)
from the same rows, so the figures are the ones the next cycle will use.

Invariants: read-only; visibility is the views' (a user sees the projects
they belong to, admins all; a GPU's holders from other projects are counted
but not named, as ``node_views.nodes`` counts their pods without naming them).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.sched.model import RESOURCES, Resource
from ringleader.sched.quota import fair_shares
from ringleader.sched.state import CycleState
from ringleader.sched.text import amount, decimal_size
from ringleader.server.models import ProjectMember, User
from ringleader.server.schemas import NodeOut, ProjectOut
from ringleader.server.services import node_views, views
from ringleader.server.snapshot import MB, load_snapshot

LABELS: dict[Resource, str] = {"gpu": "GPUs", "cpu": "CPU cores", "memory": "Memory"}


def figure(resource: Resource, value: float) -> str:
    """An amount as the page shows it: memory in decimal units, else the scheduler's."""
    return decimal_size(value) if resource == "memory" else amount(resource, value)


@dataclass
class QuotaLine:
    """One resource of one project in one pool, in the scheduler's units
    (devices, cores, bytes); ``None``: no quota (deserved) or no limit."""

    resource: Resource
    deserved: float | None
    limit: float | None
    weight: float
    allocated: float
    fair_share: float | None  # None: not limited by quota (any amount is in quota)
    capacity: float  # the pool's ready capacity of this resource

    @property
    def label(self) -> str:
        return LABELS[self.resource]

    def text(self, value: float | None, none: str = "none") -> str:
        return none if value is None else figure(self.resource, value)

    @property
    def scale(self) -> float:
        """The bar's full width: the largest figure shown (at least the capacity)."""
        figures = [self.capacity, self.allocated]
        figures += [v for v in (self.deserved, self.limit, self.fair_share) if v is not None]
        return max([f for f in figures if math.isfinite(f)] + [1e-9])

    def percent(self, value: float | None) -> float:
        """``value`` as a percentage of the bar's width (0..100), for SVG widths."""
        if value is None or not math.isfinite(value):
            return 100.0
        return round(max(0.0, min(100.0, 100.0 * value / self.scale)), 2)


@dataclass
class PoolQuota:
    pool: str
    lines: list[QuotaLine]


@dataclass
class ProjectRow:
    project: ProjectOut
    role: str | None  # the caller's role in it (None: an admin who is not a member)
    managed: bool  # False: no quota at all (its work is never over quota)
    pools: list[PoolQuota] = field(default_factory=list)


def _defined(entry: dict | None) -> bool:
    return bool(entry) and (bool(entry.get("deserved")) or entry.get("limit") is not None)


def projects(session: Session, user: User) -> list[ProjectRow]:
    """The projects ``user`` may see (``views.projects``) with, per pool, quota,
    allocation now and fair share; CPU and memory only where the project sets them."""
    shown = views.projects(session, user)
    if not shown:
        return []
    loaded = load_snapshot(session)
    state = CycleState(loaded.snapshot)
    capacity = state.capacity()
    fair = fair_shares(state.book, capacity, state.demand())
    roles = dict(
        session.execute(
            select(ProjectMember.project_id, ProjectMember.role).where(
                ProjectMember.user_id == user.id
            )
        ).all()
    )
    rows = []
    for project in shown:
        entries = {str(e.get("nodePool") or "default"): e for e in project.resources}
        used_in = {pool for (name, pool) in state.book.usage if name == project.name}
        pools = sorted(set(entries) | used_in, key=lambda p: (p != "default", p))
        pools = pools or sorted(capacity, key=lambda p: (p != "default", p)) or ["default"]
        row = ProjectRow(project, roles.get(project.id), managed=bool(project.resources))
        for pool in pools:
            entry = entries.get(pool, {})
            used = state.book.used(project.name, pool)
            share = fair.get((project.name, pool), (0.0, 0.0, 0.0))
            lines = []
            for i, resource in enumerate(RESOURCES):
                quota = entry.get(resource) or {}
                if resource != "gpu" and not _defined(quota):
                    continue
                scale = MB if resource == "memory" else 1
                limit = quota.get("limit")
                managed = row.managed and (resource == "gpu" or _defined(quota))
                lines.append(
                    QuotaLine(
                        resource=resource,
                        deserved=float(quota.get("deserved") or 0) * scale if managed else None,
                        limit=None if limit is None else float(limit) * scale,
                        weight=float(quota.get("overQuotaWeight", 1.0)),
                        allocated=used[i],
                        fair_share=share[i] if managed and math.isfinite(share[i]) else None,
                        capacity=capacity.get(pool, (0.0, 0.0, 0.0))[i],
                    )
                )
            row.pools.append(PoolQuota(pool, lines))
        rows.append(row)
    return rows


# ----- nodes ----------------------------------------------------------------------------


@dataclass
class Holder:
    """What one workload holds of one GPU (its pods' shares summed); the names only
    if the caller may see its project (else the sum of every unnamed holder)."""

    share: float
    workload: str | None = None
    workload_id: str | None = None
    project: str | None = None
    pods: list[str] = field(default_factory=list)


@dataclass
class NodeRow:
    node: NodeOut
    holders: dict[int, list[Holder]]  # GPU index -> who holds it

    def free(self, index: int) -> float:
        allocated = next((g.allocated for g in self.node.gpus if g.index == index), 0.0)
        return max(0.0, round(1.0 - allocated, 6))


def nodes(session: Session, user: User) -> list[NodeRow]:
    """``node_views.nodes`` plus, per GPU, the shares bound on it and to whom."""
    held_now = node_views.held_pods(session, user)  # one read for both
    shown = node_views.nodes(session, user, held_now)
    # (node, gpu) -> (workload id or "" for the unnamed) -> its holder, shares summed.
    held: dict[tuple[str, int], dict[str, Holder]] = defaultdict(dict)
    for item in held_now:
        row, pod, named = item.workload, item.pod, item.named
        for gpu in pod.gpus or []:
            on = held[pod.node, int(gpu["index"])]
            key = row.id if named else ""
            holder = on.get(key)
            if holder is None:
                holder = on[key] = (
                    Holder(0.0, row.name, row.id, row.project.name) if named else Holder(0.0)
                )
            holder.share = round(holder.share + float(gpu.get("share", 1.0)), 6)
            if named:
                holder.pods.append(pod.name)
    out = []
    for node in shown:
        per_gpu = {
            g.index: sorted(
                held.get((node.name, g.index), {}).values(), key=lambda h: h.workload is None
            )
            for g in node.gpus
        }
        out.append(NodeRow(node, per_gpu))
    return out

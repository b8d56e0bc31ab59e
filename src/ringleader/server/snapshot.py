"""Between the database and the pure scheduler: rows -> ``Snapshot``, and the
request a workload's spec makes for each pod.

Nomenclature:
- *holding* workload: one whose pods hold resources: admitted and not yet
  ended (Initializing, Running, Degraded, Unknown) or being stopped or
  deleted (its pods run until the backend has cancelled them).  Every pod of
  it with a node holds its binding, whatever the pod's phase: a gang that
  the backend is restarting shows Failed pods for a moment and restarts on
  the same devices.  An ended (Completed/Failed) workload still holds what
  its Running pods have (cleanPodPolicy None), and is never preempted;
- *waiting* workload: Pending with desired phase Running: what a cycle places.

Invariants: pure functions of the rows they are given (no session work
here besides the reads in ``load_snapshot``); a pod bound to a node that no
longer exists is left out of the snapshot (its capacity is gone anyway),
so a changed inventory never makes a cycle fail.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session, selectinload

from ringleader import sched
from ringleader.sched.model import UNMANAGED, Strategy
from ringleader.server import models
from ringleader.server.engine_pools import fold
from ringleader.server.images import stand_in_for
from ringleader.server.inventory import RUNTIME_FACT
from ringleader.server.phases import HOLDING, LINGERING
from ringleader.spec import Compute, WorkloadSpec
from ringleader.spec_limits import parse_quantity

MB = 10**6
log = logging.getLogger("ringleader.server.snapshot")
_ID = re.compile(rf"\b[0-9a-f]{{{models.ID_LENGTH}}}\b")


@dataclass(frozen=True)
class Loaded:
    """One cycle's input and the rows it came from (detached, read-only)."""

    snapshot: sched.Snapshot
    waiting: dict[str, models.Workload]  # id -> Pending workload to place
    nodes: dict[str, models.Node]
    names: dict[str, str]  # workload id -> name, for the scheduler's texts

    def readable(self, text: str) -> str:
        """``text`` with workload ids (the scheduler's names for them) as names."""
        return _ID.sub(lambda m: f"'{self.names[m[0]]}'" if m[0] in self.names else m[0], text)


def priority(spec: WorkloadSpec) -> int:
    """Run:ai's default: interactive (build) workloads 100, training 50."""
    dist = spec.spec
    if dist.priority_class:
        return sched.PRIORITY_CLASSES[dist.priority_class]
    return sched.BUILD if dist.interactive else sched.TRAIN


def preemptible(spec: WorkloadSpec) -> bool | None:
    """Explicit ``preemptibility`` wins; otherwise it follows the priority."""
    value = spec.spec.preemptibility
    return None if value is None else value == "preemptible"


def pod_request(
    name: str, compute: Compute, *, gpus: bool = True, image: bool = False
) -> sched.PodRequest:
    """What one pod asks the scheduler for (``gpus=False``: CPU and memory only;
    ``image``: it runs in a container image, so only on a node that runs images)."""
    devices = compute.gpu_devices_request or 0
    portion = memory = None
    by_memory = compute.gpu_request_type == "memory" or (
        compute.gpu_request_type is None and compute.gpu_portion_request is None
    )  # a gpuMemoryRequest alone is a memory request
    if gpus and by_memory and compute.gpu_memory_request:
        devices, memory = max(devices, 1), parse_quantity(compute.gpu_memory_request)
    elif gpus and compute.gpu_portion_request is not None and compute.gpu_portion_request < 1:
        devices, portion = max(devices, 1), compute.gpu_portion_request
    elif gpus and compute.gpu_portion_request is not None:  # a portion of 1 is a whole device
        devices = max(devices, 1)
    return sched.PodRequest(
        name=name,
        cpu_cores=compute.cpu_core_request or 0.0,
        memory_bytes=parse_quantity(compute.cpu_memory_request)
        if compute.cpu_memory_request
        else 0,
        gpu_devices=devices if gpus else 0,
        gpu_portion=portion,
        gpu_memory_bytes=memory,
        image=image,
    )


def pod_requests(spec: WorkloadSpec, name: str) -> list[sched.PodRequest]:
    """Every pod's request, in ``pod_layout`` order.  An MPI launcher only runs
    mpirun: it asks for GPUs only when it has its own master spec."""
    master = spec.master()
    own_master = not spec.master_spec_same_as_worker and spec.master_spec is not None
    # A walkthrough image's stand-in runs as processes wherever its image is missing.
    image = master.image or spec.spec.image
    in_image = bool(image) and stand_in_for(image) is None
    requests = []
    for pod, role, _ in spec.pod_layout(name):
        if role == "worker":
            requests.append(pod_request(pod, spec.spec.compute, image=in_image))
        else:
            registered = spec.registered_framework
            runs_ranks = registered is None or registered.layout.head_runs_ranks
            gpus = runs_ranks or own_master
            requests.append(pod_request(pod, master.compute, gpus=gpus, image=in_image))
    return requests


def to_sched_node(row: models.Node) -> sched.Node:
    return sched.Node(
        name=row.name,
        cpu_cores=row.cpu_cores,
        memory_bytes=row.memory_bytes,
        gpus=tuple(sched.Gpu(int(g["index"]), int(g.get("memoryBytes") or 0)) for g in row.gpus),
        pool=row.pool,
        labels=dict(row.labels or {}),
        ready=row.ready,
        # A node that said it has no container runtime ("") gets no image pods.
        runs_images=(row.facts or {}).get(RUNTIME_FACT) != "",
    )


def _quota(entry: dict[str, Any] | None, resource: str) -> sched.Quota:
    """A project API quota as the scheduler's; CPU and memory are unmanaged
    until given a deserved amount or a limit (as in Run:ai); memory is in MB."""
    if not entry:
        return UNMANAGED if resource != "gpu" else sched.Quota()
    deserved, limit = entry.get("deserved") or 0.0, entry.get("limit")
    weight = entry.get("overQuotaWeight", 1.0)
    if resource != "gpu" and not deserved and limit is None:
        return sched.Quota(deserved=None, over_quota_weight=weight)
    scale = MB if resource == "memory" else 1
    return sched.Quota(
        deserved=deserved * scale,
        limit=None if limit is None else limit * scale,
        over_quota_weight=weight,
    )


ALL_UNMANAGED = sched.PoolQuota(gpu=UNMANAGED)


def to_sched_project(row: models.Project, pools: Iterable[str]) -> sched.Project:
    """A project with no resources set at all is not limited by quota (any
    amount is in quota, so its work never needs to be preemptible): the
    default project on a fresh server just runs.  Once quotas are set for a
    pool, Run:ai's rules apply: GPUs not given deserve 0 there."""
    if not row.resources:
        return sched.Project(name=row.name, quotas=dict.fromkeys(pools, ALL_UNMANAGED))
    quotas = {
        str(item.get("nodePool") or sched.DEFAULT_POOL): sched.PoolQuota(
            gpu=_quota(item.get("gpu"), "gpu"),
            cpu=_quota(item.get("cpu"), "cpu"),
            memory=_quota(item.get("memory"), "memory"),
        )
        for item in row.resources or []
    }
    return sched.Project(name=row.name, quotas=quotas)


def lingering() -> ColumnElement[bool]:
    """Ended workloads with a pod still running (found through the pods' phase index)."""
    running = select(models.Pod.workload_id).where(models.Pod.phase == "Running")
    return models.Workload.phase.in_(LINGERING) & models.Workload.id.in_(running)


def holding() -> ColumnElement[bool]:
    """Live workloads whose pods hold resources (see the module doc)."""
    return models.Workload.deleted_at.is_(None) & (models.Workload.phase.in_(HOLDING) | lingering())


def holds(workload: models.Workload, pod: models.Pod) -> bool:
    """Whether ``pod`` holds its binding now (see the module doc)."""
    if not pod.node:
        return False
    if workload.phase in HOLDING:
        return True
    return workload.phase in LINGERING and pod.phase == "Running"


def bindings(workload: models.Workload, nodes: dict[str, models.Node]) -> list[sched.PodBinding]:
    """The bindings its pods hold, on nodes that still exist (``nodes`` by any name the
    binding may use: a pod on an engine's node counts against its pool node)."""
    out = []
    for pod in workload.pods:
        if not holds(workload, pod) or pod.node not in nodes:
            continue
        node = nodes[pod.node]
        indices = {int(g["index"]) for g in node.gpus}
        shares = tuple(
            sched.GpuShare(int(g["index"]), float(g.get("share", 1.0)), g.get("memoryBytes"))
            for g in pod.gpus or []
            if int(g["index"]) in indices
        )
        out.append(sched.PodBinding(pod.name, node.name, shares))
    return out


@dataclass(frozen=True)
class PodAsks:
    """What a workload's spec asks the scheduler for (a spec never changes)."""

    requests: tuple[sched.PodRequest, ...]
    priority: int
    preemptible: bool | None
    node_pools: tuple[str, ...]


_ASKS: dict[str, PodAsks] = {}  # workload id -> PodAsks: parsing 10k specs per cycle is not free
_ASKS_MAX = 100_000


def pod_asks(row: models.Workload) -> PodAsks:
    """What ``row``'s spec asks for, parsed once per workload (a spec never changes)."""
    found = _ASKS.get(row.id)
    if found is None:
        spec = WorkloadSpec.from_stored(row.spec)
        found = PodAsks(
            tuple(pod_requests(spec, row.name)),
            priority(spec),
            preemptible(spec),
            tuple(spec.spec.node_pools),
        )
        if len(_ASKS) >= _ASKS_MAX:
            _ASKS.clear()
        _ASKS[row.id] = found
    return found


def to_sched_workload(
    row: models.Workload, project: str, nodes: dict[str, models.Node]
) -> sched.Workload | None:
    """The scheduler's view of a row; None for a holding workload with nothing bound."""
    ask = pod_asks(row)
    requests = ask.requests
    common = {
        "id": row.id,
        "project": project,
        "priority": ask.priority,
        "preemptible": ask.preemptible,
        "submitted_at": row.created_at.timestamp(),
        "node_pools": ask.node_pools,
    }
    if row.phase == "Pending":
        return sched.Workload(pods=tuple(requests), **common)
    bound = bindings(row, nodes)
    if not bound:
        return None
    if row.phase in LINGERING:  # done: what still runs is not the scheduler's to stop
        common["preemptible"] = False
    names = {b.pod for b in bound}  # list only the pods that run (see sched.Workload)
    pods = tuple(r for r in requests if r.name in names)
    if len(pods) != len(bound):
        return None  # pod names no longer match the spec: nothing to account for
    return sched.Workload(pods=pods, bindings=tuple(bound), **common)


def load_snapshot(session: Session, strategy: Strategy = "binpack") -> Loaded:
    """Read nodes, projects and the holding and waiting workloads in one session."""
    # A pool whose engine places pods (Slurm) is one node here: admission, not placement.
    nodes, alias = fold(session.scalars(select(models.Node)))
    by_name = {**alias, **nodes}
    projects = list(session.scalars(select(models.Project)))
    project_names = {p.id: p.name for p in projects}
    waiting = models.Workload.deleted_at.is_(None) & (models.Workload.phase == "Pending")
    rows = session.scalars(
        select(models.Workload)
        .options(selectinload(models.Workload.pods), selectinload(models.Workload.project))
        .where(holding() | waiting)
    ).all()
    workloads: list[sched.Workload] = []
    to_place: dict[str, models.Workload] = {}
    for row in rows:
        if row.phase == "Pending" and row.desired_phase != "Running":
            continue
        try:
            workload = to_sched_workload(row, project_names[row.project_id], by_name)
        except (ValueError, KeyError) as exc:  # one bad row must not stop every placement
            log.error("workload %s (%s) left out of scheduling: %r", row.name, row.id, exc)
            continue
        if workload is None:
            continue
        workloads.append(workload)
        if row.phase == "Pending":
            to_place[row.id] = row
    pools = sorted({n.pool for n in nodes.values()})
    snapshot = sched.Snapshot(
        nodes=tuple(to_sched_node(n) for n in nodes.values()),
        projects=tuple(to_sched_project(p, pools) for p in projects),
        workloads=tuple(workloads),
        strategy=strategy,
    )
    return Loaded(snapshot, to_place, nodes, {row.id: row.name for row in rows})


def gpu_json(shares: Sequence[sched.GpuShare]) -> list[dict[str, Any]]:
    return [{"index": g.index, "share": g.share, "memoryBytes": g.memory_bytes} for g in shares]


def allocated(workload: models.Workload) -> float:
    """GPUs its pods hold (fractions as fractions), for lists and ``top``."""
    return math.fsum(
        float(g.get("share", 1.0))
        for p in workload.pods
        if holds(workload, p)
        for g in p.gpus or []
    )

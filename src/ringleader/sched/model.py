"""The scheduler's input (a ``Snapshot``) and output (``Decisions``): frozen data.

Nomenclature (Run:ai's):
- *node pool*: a named group of nodes; quotas are given per pool.
- *deserved quota*: what a project is guaranteed in a pool, per resource
  (``gpu`` in devices, ``cpu`` in cores, ``memory`` in bytes).  ``None``
  means the resource is not managed by quota: any amount is in quota.
- *limit*: what a project (or its department) may never exceed; ``None``
  means no limit.
- *over-quota weight*: how a project's claim on unused capacity compares
  with other projects' (fair share = deserved + weight share of unused).
- *workload*: a gang of pods; *gang minimum* (``min_pods``) is how many of
  its first pods must be placed together before any runs (default: all).
- *running*: a workload with bindings; its bindings are the cluster's
  current allocations.  *Pending*: a workload without.
- *share*: how much of one GPU device a pod holds: 1.0 for a whole device,
  a portion, or requested memory / device memory.

Invariants: values only, no behaviour beyond validation and small derived
properties; the server builds a ``Snapshot`` from its rows and applies the
``Decisions`` — the scheduler itself never does I/O.  A snapshot that is
inconsistent (duplicate names, a binding to an unknown node, pod or device)
raises ``ValueError`` when built, so ``schedule`` never meets one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ringleader.sched import policies

Resource = Literal["gpu", "cpu", "memory"]
RESOURCES: tuple[Resource, ...] = ("gpu", "cpu", "memory")
# A placement policy's registered name (``sched.policies``): "binpack", "spread"...
Strategy = str
PendingCause = Literal["unknown-project", "quota", "limit", "department-limit", "capacity"]

# Run:ai's priority classes; from NON_PREEMPTIBLE_PRIORITY up a workload is
# non-preemptible unless it says otherwise.
TRAIN = 50
BUILD_PREEMPTIBLE = 75
BUILD = 100
INFERENCE = 125
NON_PREEMPTIBLE_PRIORITY = 100
PRIORITY_CLASSES: Mapping[str, int] = {
    "train": TRAIN,
    "build-preemptible": BUILD_PREEMPTIBLE,
    "interactive-preemptible": BUILD_PREEMPTIBLE,
    "build": BUILD,
    "interactive": BUILD,
    "inference": INFERENCE,
}
DEFAULT_POOL = "default"


@dataclass(frozen=True)
class Gpu:
    """One GPU device of a node; ``index`` is what CUDA_VISIBLE_DEVICES names."""

    index: int
    memory_bytes: int


@dataclass(frozen=True)
class Node:
    """A machine that runs pods.  Only ready nodes receive new pods.

    ``labels`` travel with the node for the server and UI; placement does not
    match on them yet.
    """

    name: str
    cpu_cores: float
    memory_bytes: int
    gpus: tuple[Gpu, ...] = ()
    pool: str = DEFAULT_POOL
    labels: Mapping[str, str] = field(default_factory=dict)
    ready: bool = True
    runs_images: bool = True  # has a container runtime (or is not known to lack one)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", tuple(self.gpus))
        indices = [g.index for g in self.gpus]
        if len(set(indices)) != len(indices):
            raise ValueError(f"node {self.name}: duplicate GPU indices {sorted(indices)}")
        if self.cpu_cores < 0 or self.memory_bytes < 0:
            raise ValueError(f"node {self.name}: negative capacity")


@dataclass(frozen=True)
class Quota:
    """A project's claim on one resource in one pool."""

    deserved: float | None = 0.0
    limit: float | None = None
    over_quota_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.deserved is not None and self.deserved < 0:
            raise ValueError("deserved quota must be >= 0")
        if self.limit is not None and self.limit < 0:
            raise ValueError("limit must be >= 0")
        if self.over_quota_weight < 0:
            raise ValueError("over-quota weight must be >= 0")


UNMANAGED = Quota(deserved=None)


@dataclass(frozen=True)
class PoolQuota:
    """A project's quotas in one pool.  CPU and memory are unmanaged unless set,
    as in Run:ai where their quotas are off by default; GPUs deserve 0 unless set."""

    gpu: Quota = Quota()
    cpu: Quota = UNMANAGED
    memory: Quota = UNMANAGED

    def of(self, resource: Resource) -> Quota:
        return getattr(self, resource)


NO_QUOTA = PoolQuota()


@dataclass(frozen=True)
class Project:
    """A queue of workloads with quotas per node pool (pool name -> PoolQuota).

    A pool the project has no entry for gives it ``NO_QUOTA``: GPU work there
    runs only over quota, hence only when preemptible.
    """

    name: str
    quotas: Mapping[str, PoolQuota] = field(default_factory=dict)
    department: str | None = None

    def quota(self, pool: str) -> PoolQuota:
        return self.quotas.get(pool, NO_QUOTA)


@dataclass(frozen=True)
class Limits:
    """Hard caps on one pool's resources; ``None`` is no cap."""

    gpu: float | None = None
    cpu: float | None = None
    memory: float | None = None

    def of(self, resource: Resource) -> float | None:
        return getattr(self, resource)


@dataclass(frozen=True)
class Department:
    """A group of projects whose usage together stays under ``limits`` (per pool)."""

    name: str
    limits: Mapping[str, Limits] = field(default_factory=dict)

    def limit(self, pool: str) -> Limits:
        return self.limits.get(pool, Limits())


@dataclass(frozen=True)
class PodRequest:
    """What one pod asks for; mirrors spec.Compute's request fields.

    GPUs: ``gpu_devices`` devices, each whole, or each a ``gpu_portion`` of a
    device, or each ``gpu_memory_bytes`` of a device's memory.  A fractional
    request needs ``gpu_devices >= 1`` (spec.Compute's portion alone means 1).
    """

    name: str
    cpu_cores: float = 0.0
    memory_bytes: int = 0
    gpu_devices: int = 0
    gpu_portion: float | None = None
    gpu_memory_bytes: int | None = None
    image: bool = False  # runs in a container image: only on a node that runs images

    def __post_init__(self) -> None:
        if self.cpu_cores < 0 or self.memory_bytes < 0 or self.gpu_devices < 0:
            raise ValueError(f"pod {self.name}: negative request")
        if self.gpu_portion is not None and self.gpu_memory_bytes is not None:
            raise ValueError(f"pod {self.name}: ask for a GPU portion or GPU memory, not both")
        if self.gpu_portion is not None and not 0 < self.gpu_portion <= 1:
            raise ValueError(f"pod {self.name}: gpu_portion must be in (0, 1]")
        if self.gpu_memory_bytes is not None and self.gpu_memory_bytes <= 0:
            raise ValueError(f"pod {self.name}: gpu_memory_bytes must be > 0")
        if self.fractional and self.gpu_devices < 1:
            raise ValueError(f"pod {self.name}: a GPU fraction needs gpu_devices >= 1")

    @property
    def fractional(self) -> bool:
        return self.gpu_portion is not None or self.gpu_memory_bytes is not None


@dataclass(frozen=True)
class GpuShare:
    """One device a pod holds: its index and share (1.0 whole); for a memory
    request, the bytes the pod may use (the runtime caps the process to it)."""

    index: int
    share: float = 1.0
    memory_bytes: int | None = None


@dataclass(frozen=True)
class PodBinding:
    pod: str
    node: str
    gpus: tuple[GpuShare, ...] = ()


@dataclass(frozen=True)
class Workload:
    """A gang of pods in a project.  With ``bindings`` it is running.

    ``preemptible=None`` follows the priority: below NON_PREEMPTIBLE_PRIORITY
    it is preemptible.  ``node_pools`` are tried in order; empty means every
    pool of the snapshot ("default" first, then by name).  ``submitted_at`` is
    any clock's seconds: only the order matters.  Pods of a running workload
    that have no binding are placed one by one when they fit (an elastic gang
    growing past ``min_pods``), so list only pods that should run.
    """

    id: str
    project: str
    pods: tuple[PodRequest, ...]
    priority: int = TRAIN
    preemptible: bool | None = None
    submitted_at: float = 0.0
    min_pods: int | None = None
    node_pools: tuple[str, ...] = ()
    bindings: tuple[PodBinding, ...] = ()

    def __post_init__(self) -> None:
        for name in ("pods", "node_pools", "bindings"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.pods:
            raise ValueError(f"workload {self.id}: no pods")
        names = [p.name for p in self.pods]
        if len(set(names)) != len(names):
            raise ValueError(f"workload {self.id}: duplicate pod names")
        if self.min_pods is not None and not 1 <= self.min_pods <= len(self.pods):
            raise ValueError(f"workload {self.id}: min_pods must be in 1..{len(self.pods)}")
        bound = [b.pod for b in self.bindings]
        if len(set(bound)) != len(bound) or not set(bound) <= set(names):
            raise ValueError(f"workload {self.id}: bindings name unknown or repeated pods")

    @property
    def is_preemptible(self) -> bool:
        if self.preemptible is not None:
            return self.preemptible
        return self.priority < NON_PREEMPTIBLE_PRIORITY

    @property
    def gang_size(self) -> int:
        return self.min_pods or len(self.pods)

    @property
    def running(self) -> bool:
        return bool(self.bindings)


@dataclass(frozen=True)
class Snapshot:
    """Everything one scheduling cycle looks at."""

    nodes: tuple[Node, ...] = ()
    projects: tuple[Project, ...] = ()
    workloads: tuple[Workload, ...] = ()
    departments: tuple[Department, ...] = ()
    strategy: Strategy = "binpack"

    def __post_init__(self) -> None:
        for name in ("nodes", "projects", "workloads", "departments"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for kind, items in (
            ("node", [n.name for n in self.nodes]),
            ("project", [p.name for p in self.projects]),
            ("workload", [w.id for w in self.workloads]),
            ("department", [d.name for d in self.departments]),
        ):
            seen: set[str] = set()
            for item in items:
                if item in seen:
                    raise ValueError(f"duplicate {kind} {item!r} in snapshot")
                seen.add(item)
        policies.get(self.strategy)  # a ValueError naming the known policies
        departments = {d.name for d in self.departments}
        for project in self.projects:
            if project.department is not None and project.department not in departments:
                raise ValueError(f"project {project.name}: unknown department {project.department}")
        nodes = {n.name: n for n in self.nodes}
        for workload in self.workloads:
            for binding in workload.bindings:
                node = nodes.get(binding.node)
                if node is None:
                    raise ValueError(
                        f"workload {workload.id}: bound to unknown node {binding.node}"
                    )
                indices = {g.index for g in node.gpus}
                if any(share.index not in indices for share in binding.gpus):
                    raise ValueError(f"workload {workload.id}: unknown GPU on {node.name}")


@dataclass(frozen=True)
class Placement:
    """Pods of one workload bound this cycle (the gang, or extra pods of an
    elastic workload that is already running)."""

    workload: str
    pool: str
    pods: tuple[PodBinding, ...]


@dataclass(frozen=True)
class Preemption:
    """A whole running workload to stop and return to Pending."""

    workload: str
    reason: str
    for_workload: str


@dataclass(frozen=True)
class Pending:
    workload: str
    reason: str
    cause: PendingCause


@dataclass(frozen=True)
class Decisions:
    """One cycle's outcome.  Apply ``preemptions`` before ``placements``: a
    placement may use what a preemption frees."""

    placements: tuple[Placement, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    pending: tuple[Pending, ...] = ()

    def placement(self, workload: str) -> Placement | None:
        return next((p for p in self.placements if p.workload == workload), None)

    def pending_reason(self, workload: str) -> str | None:
        return next((p.reason for p in self.pending if p.workload == workload), None)

    def preempted(self) -> tuple[str, ...]:
        return tuple(p.workload for p in self.preemptions)

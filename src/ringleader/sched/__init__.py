"""The scheduler, pure: a ``Snapshot`` in, ``Decisions`` out (``schedule``).

Run:ai's policy on projects with deserved quotas, limits and over-quota
weights per node pool: gangs placed whole, in-quota work first, fair share
of unused capacity by weight, reclaim and priority preemption of whole
preemptible workloads, bin-packing, spreading or another registered
placement policy (``sched.policies``), GPU fractions sharing devices.
No I/O, no DB, no clock: the server builds the snapshot and applies the
decisions.
"""

from ringleader.sched.incremental import IncrementalScheduler
from ringleader.sched.model import (
    BUILD,
    BUILD_PREEMPTIBLE,
    DEFAULT_POOL,
    INFERENCE,
    NON_PREEMPTIBLE_PRIORITY,
    PRIORITY_CLASSES,
    TRAIN,
    Decisions,
    Department,
    Gpu,
    GpuShare,
    Limits,
    Node,
    Pending,
    Placement,
    PodBinding,
    PodRequest,
    PoolQuota,
    Preemption,
    Project,
    Quota,
    Snapshot,
    Workload,
)
from ringleader.sched.scheduler import schedule

__all__ = [
    "BUILD",
    "BUILD_PREEMPTIBLE",
    "DEFAULT_POOL",
    "INFERENCE",
    "NON_PREEMPTIBLE_PRIORITY",
    "PRIORITY_CLASSES",
    "TRAIN",
    "Decisions",
    "Department",
    "Gpu",
    "GpuShare",
    "IncrementalScheduler",
    "Limits",
    "Node",
    "Pending",
    "Placement",
    "PodBinding",
    "PodRequest",
    "PoolQuota",
    "Preemption",
    "Project",
    "Quota",
    "Snapshot",
    "Workload",
    "schedule",
]

"""A workload's gang as a cycle's trials read it, worked out once per workload.

Nomenclature (``scheduler``'s): the *gang* is a workload's first ``gang_size``
pods, placed together; its *shape* is ``shortage.gang_signature`` of them,
what decides its trials (the miss memory's key); its *order* is the order
``place_gang`` takes them in.  All of it is a pure function of the workload,
so ``incremental`` carries it from one cycle to the next for an unchanged
workload.
"""

from __future__ import annotations

from typing import NamedTuple

from ringleader.sched.model import PodRequest, Workload
from ringleader.sched.placement import fill_order
from ringleader.sched.shortage import gang_signature


class Gang(NamedTuple):
    """A workload's gang, worked out once per cycle: its pods, the order
    ``place_gang`` takes them in, and whether that is their own order (then a
    placement that passed its trial can be kept as it is: holding the grants
    afresh would take the same pods in the same order, to the same values)."""

    pods: tuple[PodRequest, ...]
    order: tuple[int, ...]
    in_order: bool
    shape: tuple[object, ...]  # shortage.gang_signature(pods): what decides its trials


_FIRST = (0,)


def estimate_is_exact(pods: tuple[PodRequest, ...]) -> bool:
    """Whether ``grants_amounts`` of any placement of ``pods`` is bit for bit their
    ``CycleState.estimate``: no GPU-memory share (whose device decides it) and no
    portion of several devices (summed there, multiplied here); the same
    additions in the same order otherwise."""
    for pod in pods:
        if pod.gpu_memory_bytes is not None or (
            pod.gpu_portion is not None and pod.gpu_devices > 1
        ):
            return False
    return True


def gang_of(workload: Workload) -> Gang:
    """The workload's gang as its trials read it (a pure function of the workload)."""
    if len(workload.pods) == 1:  # most workloads
        return Gang(workload.pods, _FIRST, True, gang_signature(workload.pods))
    pods = workload.pods[: workload.gang_size]
    shape = gang_signature(pods)
    if len(set(shape)) == 1:
        order: tuple[int, ...] = tuple(range(len(pods)))  # fill_order's, for less
    else:
        order = tuple(fill_order(pods))
    return Gang(pods, order, order == tuple(range(len(pods))), shape)

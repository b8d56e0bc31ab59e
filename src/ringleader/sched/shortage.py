"""Why a gang does not fit in a pool, in words a user can act on.

Nomenclature:
- *need*: what one pod asks for ("4 whole GPUs", "0.5 of a GPU");
- *offer*: the best any ready node of the pool has of the short resource,
  with the node's name ("the most free on any node is 3 (node-7)"), or the
  largest node's size when no node could ever hold the pod.

Invariants: explaining reads the state and changes nothing; a reason is
cached per journal version, so a flood of workloads that miss for the same
cause costs one walk over the nodes, not one each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ringleader.sched.model import PodRequest
from ringleader.sched.nodes import CPU, EPS, MEMORY, SHARE, WHOLE, NodeState
from ringleader.sched.placement import (
    Cluster,
    Shortfall,
    device_share,
    gang_needs,
    pod_size,
)
from ringleader.sched.text import counted, number, size


@dataclass(frozen=True)
class GangMiss:
    """Why a gang did not fit in a pool, said for a user."""

    reason: str


def explain(cluster: Cluster, pool: str, pods: Sequence[PodRequest], shortfall: Shortfall) -> str:
    if cluster.explained_at != cluster.journal.version:
        cluster.explanations.clear()
        cluster.explained_at = cluster.journal.version
    key = (pool, shortfall.placed, request_signature(shortfall.pod), *gang_signature(pods))
    if key not in cluster.explanations:
        cluster.explanations[key] = _explain(cluster, pool, pods, shortfall)
    return cluster.explanations[key]


def gang_signature(pods: Sequence[PodRequest]) -> tuple[object, ...]:
    """What of a gang its placement and its reasons read: each pod's request in order,
    and the pods' names when the requests differ (a reason then names one pod)."""
    signatures = tuple(map(request_signature, pods))
    if len(set(signatures)) > 1:
        return signatures + tuple(p.name for p in pods)
    return signatures


def request_signature(pod: PodRequest | None) -> tuple[object, ...]:
    """What of a pod placement and its reasons read: its request, not its name."""
    if pod is None:
        return ()
    return (
        pod.cpu_cores,
        pod.memory_bytes,
        pod.gpu_devices,
        pod.gpu_portion,
        pod.gpu_memory_bytes,
        pod.image,
    )


def _explain(cluster: Cluster, pool: str, pods: Sequence[PodRequest], shortfall: Shortfall) -> str:
    nodes = cluster.ready(pool)
    if not nodes:
        waiting = len(cluster.pools.get(pool, ()))
        return (
            f"no ready node in pool {pool} ({waiting} not ready)"
            if waiting
            else f"no node in pool {pool}"
        )
    pod = shortfall.pod or max(pods, key=pod_size)
    if pod.image and not any(n.runs_images for n in nodes):
        return (
            # No pod name: the reason is shared by every gang of the same requests
            # (``explain``'s cache), other projects' workloads included.
            f"its pods run in a container image, and no ready node in pool {pool} "
            "has a container runtime (podman or docker; `ringleader nodes list` shows each "
            "node's)"
        )
    if pod.image:
        what, offer = _shortage([n for n in nodes if n.runs_images], pod)
    else:  # every ready node, whose largest the cluster knows
        what, offer = _shortage(nodes, pod, cluster.most_gpus(pool))
    if shortfall.pod is None and offer == ALL_AT_ONCE:
        return _pool_shortage(cluster, pool, pods)
    if len(pods) == 1:
        head = f"needs {what} on one node in pool {pool}"
    elif all(request_signature(p) == request_signature(pod) for p in pods):
        head = f"a gang of {len(pods)} pods needs {what} per pod in pool {pool}"
    else:
        head = f"pod {pod.name} of a gang of {len(pods)} needs {what} on one node in pool {pool}"
    then = f"{shortfall.placed} of {len(pods)} fit, then " if shortfall.placed else ""
    return f"{head}; {then}{offer}"


ALL_AT_ONCE = "no node has all of it free at once"


def _pool_shortage(cluster: Cluster, pool: str, pods: Sequence[PodRequest]) -> str:
    """Each pod would fit somewhere, but the pool has too little for all of them."""
    need = gang_needs(pods, cluster.max_device_memory(pool))
    free = cluster.pool_free[pool]
    identical = all(request_signature(p) == request_signature(pods[0]) for p in pods)
    for i, words in (
        (WHOLE, lambda v: counted(v, "whole GPU")),
        (SHARE, lambda v: counted(v, "GPU")),
        (CPU, lambda v: counted(v, "CPU core")),
        (MEMORY, lambda v: f"{size(v)} of memory"),
    ):
        if need[i] > free[i] + EPS:
            each = f"{words(need[i] / len(pods))} per pod, " if identical else ""
            return (
                f"a gang of {len(pods)} pods needs {each}{words(need[i])} in all in pool {pool}; "
                f"{number(free[i]) if i != MEMORY else size(free[i])} free"
            )
    return f"a gang of {len(pods)} pods does not fit in pool {pool}"


def _gpu_need(pod: PodRequest) -> str:
    count = pod.gpu_devices
    if not pod.fractional:
        return counted(count, "whole GPU")
    if pod.gpu_portion is not None:
        each = number(pod.gpu_portion)
        return f"{each} of a GPU" if count == 1 else f"{count} GPUs with {each} free each"
    each = size(pod.gpu_memory_bytes or 0)
    return f"{each} of GPU memory" if count == 1 else f"{count} GPUs with {each} free each"


def _shortage(
    nodes: Sequence[NodeState], pod: PodRequest, largest: NodeState | None = None
) -> tuple[str, str]:
    """(need, offer) for the first resource no single node has enough of
    (``largest``: the first of ``nodes`` with the most devices, when known)."""
    if pod.gpu_devices:
        offer = _gpu_offer(nodes, pod, largest)
        if offer:
            return _gpu_need(pod), offer
    for i, wanted in ((CPU, pod.cpu_cores), (MEMORY, float(pod.memory_bytes))):
        if not wanted:
            continue
        figure = number if i == CPU else size
        need = counted(wanted, "CPU core") if i == CPU else f"{size(wanted)} of memory"
        biggest = _first_max(nodes, [n.capacity[i] for n in nodes])
        if biggest.capacity[i] + EPS < wanted:
            return need, f"the largest node has {figure(biggest.capacity[i])} ({biggest.name})"
        best = _first_max(nodes, [n.free[i] for n in nodes])
        if best.free[i] + EPS < wanted:
            return need, _most_free(figure(best.free[i]), best.name, best.free[i])
    needs = [_gpu_need(pod)] if pod.gpu_devices else []
    if pod.cpu_cores:
        needs.append(counted(pod.cpu_cores, "CPU core"))
    if pod.memory_bytes:
        needs.append(f"{size(pod.memory_bytes)} of memory")
    return " and ".join(needs), ALL_AT_ONCE


def _most_free(figure: str, node: str, value: float) -> str:
    if value <= EPS:
        return "none is free on any ready node"
    return f"the most free on any node is {figure} ({node})"


def _first_max(nodes: Sequence[NodeState], values: list[float]) -> NodeState:
    """The first node with the largest value, as ``max(nodes, key=...)`` picks
    it, from the values listed in one pass (a walk over every node of a big
    pool, so without a call per node)."""
    return nodes[values.index(max(values))]


def _gpu_offer(
    nodes: Sequence[NodeState], pod: PodRequest, largest: NodeState | None = None
) -> str:
    """The best GPU offer when it falls short of the pod's need, else ''."""
    if largest is None:
        largest = _first_max(nodes, [len(n.gpus) for n in nodes])
    if len(largest.gpus) < pod.gpu_devices:
        if not largest.gpus:
            return "no node in the pool has GPUs"
        return f"the largest node has {len(largest.gpus)} ({largest.name})"
    if not pod.fractional:
        best = _first_max(nodes, [n.free[WHOLE] for n in nodes])
        count = int(best.free[WHOLE])
        return "" if count >= pod.gpu_devices else _most_free(str(count), best.name, count)
    if pod.gpu_devices == 1:
        return _one_device_offer(nodes, pod)
    counts = [_devices_with_room(n, pod) for n in nodes]
    count = max(counts)
    best = nodes[counts.index(count)]
    if count >= pod.gpu_devices:
        return ""
    return f"the most GPUs with room for it on any node is {count} ({best.name})"


def _one_device_offer(nodes: Sequence[NodeState], pod: PodRequest) -> str:
    """``_gpu_offer`` for a fraction of one device: '' when some device has room,
    else the device with the most free (memory, or share): the first of the largest
    in node and device order.

    Each node is read through its least used device where its devices are of one
    size: the room a device has and its free figure only fall as its use grows
    (float additions and products by a positive size keep their order), so that
    device answers for the node, with one ``min`` rather than a figure per device
    (a pool of 5,000 nodes is walked for each such reason)."""
    limit = 1 + EPS
    memory = pod.gpu_memory_bytes
    tops: list[float] = []  # each node's most free figure
    for n in nodes:
        used = n.used
        if not used:
            tops.append(-math.inf)
            continue
        least = min(used)
        if pod.gpu_portion is not None or n.device_memory is not None:
            share = pod.gpu_portion
            if share is None:
                share = device_share(pod, n.device_memory or 0)
            if least + share <= limit:
                return ""
        elif _devices_with_room(n, pod):
            return ""
        if memory is None:
            tops.append(1.0 - least)
        elif n.device_memory is not None:
            tops.append((1.0 - least) * n.device_memory)
        else:
            tops.append(max((1.0 - u) * g.memory_bytes for g, u in zip(n.gpus, used, strict=True)))
    top = max(tops)
    n = nodes[tops.index(top)]
    for g, used in zip(n.gpus, n.used, strict=True):
        if (1.0 - used if memory is None else (1.0 - used) * g.memory_bytes) == top:
            break
    if memory is not None:
        memory = (1.0 - used) * g.memory_bytes
        return f"the most free GPU memory on any device is {size(memory)} ({n.name} GPU {g.index})"
    return f"the largest free share of any GPU is {number(1.0 - used)} ({n.name} GPU {g.index})"


def _devices_with_room(node: NodeState, pod: PodRequest) -> int:
    if pod.gpu_portion is not None or node.device_memory is not None:
        share = pod.gpu_portion
        if share is None:
            share = device_share(pod, node.device_memory or 0)
        limit = 1 + EPS
        return sum(used + share <= limit for used in node.used)
    pairs = zip(node.gpus, node.used, strict=True)
    return sum(used + device_share(pod, g.memory_bytes) <= 1 + EPS for g, used in pairs)

"""Node and GPU packing: which node and which devices each pod of a gang gets.

Nomenclature:
- *grant*: what one pod holds on one node: CPU cores, memory bytes and, per
  device, a share (1.0 = the whole device).
- *device position*: a device's place in ``NodeState.gpus``; bindings name
  the device by its ``Gpu.index``.
- *free row*: ``[cpu, memory, gpu share, whole devices]`` free, kept per
  node and summed per pool (ready nodes only), so most misses are found
  from the pool's sums without visiting a node.

Invariants:
- a device's shares sum to at most 1 (within EPS); a whole-device request
  takes only devices with nothing on them and fills them, so whole devices
  never share with fractions;
- only ready nodes receive pods, and a gang lies in one node pool;
- every change goes through the journal, so a trial (a gang that does not
  fit, a preemption only being weighed) is undone exactly;
- ties go to the node name and device position, never to dict or set order;
- which node and which devices are best is the placement policy's alone
  (``sched.policies``): nothing here names a policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ringleader.sched import policies
from ringleader.sched.journal import Journal
from ringleader.sched.model import GpuShare, Node, PodBinding, PodRequest, Strategy
from ringleader.sched.nodes import CPU, EPS, MEMORY, SHARE, WHOLE, NodeOrder, NodeState
from ringleader.sched.policies import PlacementPolicy


class Grant:
    """What one pod holds on one node.  Never changed once made; a plain
    slotted class rather than a frozen dataclass because trials make and
    read them by the thousand, and ``gpus`` is summed once, not per read."""

    __slots__ = ("devices", "gpus", "node", "pod")

    def __init__(
        self, node: NodeState, pod: PodRequest, devices: tuple[tuple[int, float], ...] = ()
    ) -> None:
        self.node = node
        self.pod = pod
        self.devices = devices  # (device position, share)
        self.gpus: float = sum(share for _, share in devices)

    def binding(
        self, cache: dict[tuple[int, float, int | None], GpuShare] | None = None
    ) -> PodBinding:
        """The pod's binding; equal ``GpuShare`` values come from ``cache`` when
        given (they are frozen, and thousands of pods hold the same few)."""
        memory = self.pod.gpu_memory_bytes
        gpus = self.node.gpus
        if cache is None:
            shares = tuple(GpuShare(gpus[p].index, s, memory) for p, s in self.devices)
        else:
            found = []
            for p, s in self.devices:
                key = (gpus[p].index, s, memory)
                share = cache.get(key)
                if share is None:
                    share = cache[key] = GpuShare(*key)
                found.append(share)
            shares = tuple(found)
        return PodBinding(self.pod.name, self.node.name, shares)


class Cluster:
    """Every node's state, by pool, with take/release through the journal."""

    def __init__(self, nodes: Sequence[Node], strategy: Strategy, journal: Journal) -> None:
        self.journal = journal
        self.policy = policies.get(strategy)
        self.nodes = {n.name: NodeState(n) for n in sorted(nodes, key=lambda n: n.name)}
        self.pools: dict[str, list[NodeState]] = {}
        self.pool_free: dict[str, list[float]] = {}
        for state in self.nodes.values():
            self.pools.setdefault(state.pool, []).append(state)
            row = self.pool_free.setdefault(state.pool, [0.0, 0.0, 0.0, 0.0])
            if state.ready:
                for i, value in enumerate(state.free):
                    row[i] += value
        # Reasons worked out for the current state (shortage.explain), keyed by
        # request and reset whenever the journal's version moves on.
        self.explanations: dict[tuple[object, ...], str] = {}
        self.explained_at: int | None = None
        # GpuShare values handed out in bindings this cycle (see Grant.binding).
        self.shares: dict[tuple[int, float, int | None], GpuShare] = {}
        self._ready = {pool: [n for n in nodes if n.ready] for pool, nodes in self.pools.items()}
        self.orders = {
            pool: NodeOrder(nodes, self.policy, journal) for pool, nodes in self._ready.items()
        }
        self._most_gpus: dict[str, NodeState] = {}  # (most_gpus: the ready set is fixed)
        self._device_memory = {
            pool: max((g.memory_bytes for n in nodes for g in n.gpus), default=0)
            for pool, nodes in self._ready.items()
        }

    def ready(self, pool: str) -> list[NodeState]:
        return self._ready.get(pool, [])

    def most_gpus(self, pool: str) -> NodeState:
        """The first of the pool's ready nodes with the most devices (there is one)."""
        found = self._most_gpus.get(pool)
        if found is None:
            nodes = self._ready[pool]
            counts = [len(n.gpus) for n in nodes]
            found = self._most_gpus[pool] = nodes[counts.index(max(counts))]
        return found

    def max_device_memory(self, pool: str) -> int:
        """The largest device of the pool's ready nodes (0 without any)."""
        return self._device_memory.get(pool, 0)

    def grant_of(self, binding: PodBinding, pod: PodRequest) -> Grant:
        """The grant behind a running pod's binding (as the snapshot states it)."""
        node = self.nodes[binding.node]
        positions = {g.index: pos for pos, g in enumerate(node.gpus)}
        return Grant(node, pod, tuple((positions[g.index], g.share) for g in binding.gpus))

    def take(self, grant: Grant) -> None:
        self._change(grant, +1)

    def release(self, grant: Grant) -> None:
        self._change(grant, -1)

    def _change(self, grant: Grant, sign: int) -> None:
        # Rows are saved whole (one journal entry each) and then changed in
        # place, with the same arithmetic, in the same order, as ever.
        node, journal = grant.node, self.journal
        journal.set(node.pods, 0, node.pods[0] + sign)
        if grant.devices:
            journal.save(node.used)
        delta = change_devices(node.used, grant, sign)
        rows = (node.free, self.pool_free[node.pool]) if node.ready else (node.free,)
        for row in rows:
            journal.save(row)
            for i, change in enumerate(delta):
                if change:
                    row[i] = row[i] + change
        if node.ready:
            self.orders[node.pool].update(node)


def change_devices(used: list[float], grant: Grant, sign: int) -> list[float]:
    """Take (``sign`` +1) or give back (-1) ``grant``'s device shares in ``used``,
    and return the change of the node's free row it makes: one arithmetic for
    the cluster's rows and for ``NodeView``, so both get the same floats."""
    delta = [-sign * grant.pod.cpu_cores, -sign * float(grant.pod.memory_bytes), 0.0, 0.0]
    for pos, share in grant.devices:
        before = used[pos]
        after = before + sign * share
        used[pos] = after
        delta[SHARE] -= sign * share
        delta[WHOLE] += (after <= EPS) - (before <= EPS)
    return delta


class NodeView:
    """A node's rows as they would be after some releases, for ``holds`` to read
    without changing the node (reclaim's deferred releases, ``sched.deferral``)."""

    __slots__ = ("device_memory", "free", "gpus", "runs_images", "used")

    def __init__(self, node: NodeState, grants: Sequence[Grant]) -> None:
        self.gpus, self.device_memory, self.runs_images = (
            node.gpus, node.device_memory, node.runs_images,
        )  # fmt: skip
        self.free, self.used = node.free.copy(), node.used.copy()
        for grant in grants:
            delta = change_devices(self.used, grant, -1)
            for i, change in enumerate(delta):
                if change:
                    self.free[i] = self.free[i] + change


@dataclass(frozen=True)
class Shortfall:
    """Where a gang stopped: the pod that found no node after ``placed`` others
    did, or no pod at all when the pool's sums already ruled the gang out."""

    pod: PodRequest | None
    placed: int


def place_gang(
    cluster: Cluster,
    pool: str,
    pods: Sequence[PodRequest],
    order: Sequence[int] | None = None,
) -> list[Grant] | Shortfall:
    """Grants for every pod in ``pods``, taken in ``cluster``, or where it stopped.

    Pods are placed largest first (first-fit decreasing, ``fill_order``;
    a caller that placed this gang before passes the order it got), each on
    the best node for the cluster's placement policy.  On a shortfall the grants already taken
    stay taken, so the caller can explain it from the state the gang left
    before rolling the journal back.
    """
    largest = cluster.max_device_memory(pool)
    if not cluster.ready(pool) or pool_lacks(cluster.pool_free[pool], pods, largest):
        return Shortfall(None, 0)
    if order is None:
        order = fill_order(pods)
    grants: list[Grant | None] = [None] * len(pods)
    for placed, i in enumerate(order):
        grant = best_grant(cluster.orders[pool], pods[i], largest)
        if grant is None:
            return Shortfall(pods[i], placed)
        cluster.take(grant)
        grants[i] = grant
    return [g for g in grants if g is not None]


def fill_order(pods: Sequence[PodRequest]) -> list[int]:
    """Positions of ``pods``, largest first; equal pods keep their order, so a
    gang of one shape is taken in its own order."""
    return sorted(range(len(pods)), key=lambda i: (pod_size(pods[i]), -i), reverse=True)


def gang_needs(pods: Sequence[PodRequest], largest_device_memory: int) -> list[float]:
    """The gang's total as a free row: what the pool must have free at least."""
    need = [0.0, 0.0, 0.0, 0.0]
    for pod in pods:
        need[CPU] += pod.cpu_cores
        need[MEMORY] += pod.memory_bytes
        if pod.fractional:
            need[SHARE] += pod.gpu_devices * device_share(pod, largest_device_memory)
        else:
            need[SHARE] += pod.gpu_devices
            need[WHOLE] += pod.gpu_devices
    return need


def pool_lacks(free: Sequence[float], pods: Sequence[PodRequest], device_memory: int) -> bool:
    need = gang_needs(pods, device_memory)
    return (
        need[0] > free[0] + EPS
        or need[1] > free[1] + EPS
        or need[2] > free[2] + EPS
        or need[3] > free[3] + EPS
    )


def pod_size(pod: PodRequest) -> tuple[float, ...]:
    share = pod.gpu_portion if pod.gpu_portion is not None else 1.0
    return (pod.gpu_devices * share, pod.gpu_memory_bytes or 0, pod.cpu_cores, pod.memory_bytes)


def best_grant(order: NodeOrder, pod: PodRequest, largest_device_memory: int) -> Grant | None:
    """The pod's grant on the first node in ``order`` it fits: the order is the
    placement policy's, best first (bin-packing: the least free GPU share, CPU
    and memory; spreading: the most)."""
    wanted, whole = pod.gpu_devices, not pod.fractional
    share = wanted * device_share(pod, largest_device_memory) if wanted else 0.0
    for node in order.best_first(share):
        if pod.image and not node.runs_images:
            continue
        free = node.free
        if free[CPU] + EPS < pod.cpu_cores or free[MEMORY] < pod.memory_bytes:
            continue
        if whole and free[WHOLE] < wanted:
            continue
        devices = devices_for(node, pod, order.policy)
        if devices is not None:
            return Grant(node, pod, devices)
    return None


def holds(node: NodeState | NodeView, pod: PodRequest, policy: PlacementPolicy) -> bool:
    """Whether ``best_grant`` would take ``node`` for the pod were it a candidate:
    the same checks, for one node (reclaim's proof that a release made no room)."""
    if pod.image and not node.runs_images:
        return False
    free = node.free
    if free[CPU] + EPS < pod.cpu_cores or free[MEMORY] < pod.memory_bytes:
        return False
    if not pod.fractional and free[WHOLE] < pod.gpu_devices:
        return False
    return devices_for(node, pod, policy) is not None


def devices_for(
    node: NodeState | NodeView, pod: PodRequest, policy: PlacementPolicy
) -> tuple[tuple[int, float], ...] | None:
    """Device positions and shares for the pod on this node, or None.

    Whole devices: the lowest free positions (they are all alike).
    Fractions: devices with room, by the policy's ``device_rank`` of their
    used share, ties to the position (bin-packing: the fullest first, so
    partly used devices fill up before a fresh one is broken into;
    spreading: the emptiest first).
    """
    wanted = pod.gpu_devices
    if wanted == 0:
        return ()
    if not pod.fractional:
        free = [pos for pos, used in enumerate(node.used) if used <= EPS]
        return tuple((pos, 1.0) for pos in free[:wanted]) if len(free) >= wanted else None
    if pod.gpu_portion is not None or node.device_memory is not None:
        # One share for every device of the node: a portion, or memory over
        # the one device size; the same test and order as below, in fewer steps.
        share = pod.gpu_portion
        if share is None:
            share = device_share(pod, node.device_memory or 0)
        limit, rank = 1 + EPS, policy.device_rank
        fits = [
            (rank(used, pos), pos) for pos, used in enumerate(node.used) if used + share <= limit
        ]
        if len(fits) < wanted:
            return None
        fits.sort()
        return tuple((pos, share) for _, pos in fits[:wanted])
    room, rank = [], policy.device_rank
    for pos, (gpu, used) in enumerate(zip(node.gpus, node.used, strict=True)):
        share = device_share(pod, gpu.memory_bytes)
        if used + share <= 1 + EPS:
            room.append((rank(used, pos), pos, share))
    if len(room) < wanted:
        return None
    room.sort()
    return tuple((pos, share) for _, pos, share in room[:wanted])


def device_share(pod: PodRequest, device_memory: int) -> float:
    """The share of one device a pod takes there (1.0 for a whole device)."""
    if pod.gpu_portion is not None:
        return pod.gpu_portion
    if pod.gpu_memory_bytes is None:
        return 1.0
    return pod.gpu_memory_bytes / device_memory if device_memory else float("inf")

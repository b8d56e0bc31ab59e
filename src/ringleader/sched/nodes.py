"""Nodes as placement sees them: changing free rows, and each pool's order.

Nomenclature:
- *free row*: ``[cpu, memory, gpu share, whole devices]`` free on a node;
- *node key*: the placement policy's sort key for a node, its name last
  (``policies.PlacementPolicy.node_key``), so the best node for the policy
  sorts first and ties go to the name.

Invariants: a pool's order follows every change of a node's free row or pod
count, and a rollback's too.  It follows lazily: a change, and the journal
entry that undoes it, only mark the node as moved (``update``), and the
order puts the marked nodes in their places when it is next read
(``best_first``), from their free rows as they are then.  Choosing victims
releases hundreds of workloads between two reads and rolls most of them
back: each node is re-sorted once per read, not once per change and once
more per undo.  The order is thus a cache of the nodes' rows, kept out of
the journal; what it holds when read is the same either way.  The policy's
``candidates`` walks the order from the best node and skips or stops at
nodes with too little GPU share (bin-packing bisects, spreading stops);
either way the first node that fits is the best, so a placement rarely
looks at more than a few nodes however large the pool.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING

from ringleader.sched.journal import Journal
from ringleader.sched.model import Node

if TYPE_CHECKING:
    from ringleader.sched.policies import NodeKey, PlacementPolicy

EPS = 1e-9
CPU, MEMORY, SHARE, WHOLE = range(4)


class NodeState:
    """A node's free row, its devices' used shares and its pod count, as they change."""

    __slots__ = (
        "capacity", "device_memory", "free", "gpus", "name", "pods", "pool", "ready",
        "runs_images", "used",
    )  # fmt: skip

    def __init__(self, node: Node) -> None:
        self.name = node.name
        self.pool = node.pool
        self.ready = node.ready
        self.runs_images = node.runs_images
        self.gpus = tuple(sorted(node.gpus, key=lambda g: g.index))
        self.capacity = (node.cpu_cores, float(node.memory_bytes))
        count = float(len(self.gpus))
        self.free: list[float] = [*self.capacity, count, count]
        self.used: list[float] = [0.0] * len(self.gpus)
        # Pods granted here, in a list of one so the journal can restore it: what
        # spreading counts when pods request nothing that a free row would show.
        self.pods: list[int] = [0]
        sizes = {g.memory_bytes for g in self.gpus}
        # The size of every device when all have one size, else None.
        self.device_memory: int | None = sizes.pop() if len(sizes) == 1 else None


class NodeOrder:
    """One pool's ready nodes, sorted best-first by the placement policy's key."""

    def __init__(
        self, nodes: Sequence[NodeState], policy: PlacementPolicy, journal: Journal
    ) -> None:
        self.policy = policy
        self._key = policy.node_key
        self._journal = journal
        self._nodes = {n.name: n for n in nodes}
        self._keys = {n.name: self._key(n) for n in nodes}
        self._sorted = sorted(self._keys.values())
        # Nodes whose free row changed since they were last put in their place.
        self._stale: dict[str, NodeState] = {}

    def update(self, node: NodeState) -> None:
        """Note that ``node``'s free row changed (it moves when the order is read),
        and have a rollback of that change note it again."""
        name = node.name
        self._stale[name] = node
        self._journal.record(partial(self._stale.__setitem__, name, node))

    def catch_up(self) -> None:
        """Move every changed node to where its free row now puts it."""
        for name, node in self._stale.items():
            old, new = self._keys[name], self._key(node)
            if old != new:
                self._move(name, old, new)
        self._stale.clear()

    def _move(self, name: str, old: NodeKey, new: NodeKey) -> None:
        """Re-sort one node from ``old`` to ``new`` (its key, kept in step)."""
        del self._sorted[bisect_left(self._sorted, old)]
        insort(self._sorted, new)
        self._keys[name] = new

    def best_first(self, share: float) -> Iterator[NodeState]:
        """Nodes that may hold ``share`` of a GPU, best first (the policy stops early)."""
        if self._stale:
            self.catch_up()
        return map(self._nodes.__getitem__, self.policy.candidates(self._sorted, share))

"""Nodes as placement sees them: changing free rows, and each pool's order.

Nomenclature:
- *free row*: ``[cpu, memory, gpu share, whole devices]`` free on a node;
- *rank key*: (free GPU share, free CPU, free memory, name), negated but the
  name when spreading, so the best node for the strategy sorts first and
  ties go to the name.

Invariants: a pool's order changes, through the journal, every time a
node's free row does, so a rollback restores it too.  Bin-packing finds its
first candidate by bisection on the GPU share a pod needs (skipping full
nodes), spreading stops at the first node with too little share; either way
the first node that fits is the best, so a placement rarely looks at more
than a few nodes however large the pool.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Sequence

from ringleader.sched.journal import Journal
from ringleader.sched.model import Node, Strategy

EPS = 1e-9
CPU, MEMORY, SHARE, WHOLE = range(4)
RankKey = tuple[float, float, float, str]


class NodeState:
    """A node's free row and its devices' used shares, as they change."""

    __slots__ = ("capacity", "device_memory", "free", "gpus", "name", "pool", "ready", "used")

    def __init__(self, node: Node) -> None:
        self.name = node.name
        self.pool = node.pool
        self.ready = node.ready
        self.gpus = tuple(sorted(node.gpus, key=lambda g: g.index))
        self.capacity = (node.cpu_cores, float(node.memory_bytes))
        count = float(len(self.gpus))
        self.free: list[float] = [*self.capacity, count, count]
        self.used: list[float] = [0.0] * len(self.gpus)
        sizes = {g.memory_bytes for g in self.gpus}
        # The size of every device when all have one size, else None.
        self.device_memory: int | None = sizes.pop() if len(sizes) == 1 else None


class NodeOrder:
    """One pool's ready nodes, sorted best-first for the strategy."""

    def __init__(self, nodes: Sequence[NodeState], strategy: Strategy, journal: Journal) -> None:
        self._sign = 1 if strategy == "binpack" else -1
        self._journal = journal
        self._nodes = {n.name: n for n in nodes}
        self._keys = {n.name: self._key(n) for n in nodes}
        self._sorted = sorted(self._keys.values())

    def _key(self, node: NodeState) -> RankKey:
        free, sign = node.free, self._sign
        return (
            sign * round(free[SHARE], 9),
            sign * round(free[CPU], 9),
            sign * free[MEMORY],
            node.name,
        )

    def update(self, node: NodeState) -> None:
        """Move ``node`` to where its free row now puts it."""
        name = node.name
        old, new = self._keys[name], self._key(node)
        if old == new:
            return
        self._move(name, old, new)
        self._journal.record(lambda: self._move(name, new, old))

    def _move(self, name: str, old: RankKey, new: RankKey) -> None:
        """Re-sort one node from ``old`` to ``new`` (its key, kept in step)."""
        del self._sorted[bisect_left(self._sorted, old)]
        insort(self._sorted, new)
        self._keys[name] = new

    def best_first(self, share: float) -> Iterator[NodeState]:
        """Nodes with at least ``share`` of GPU free, best first (stop early)."""
        keys = self._sorted
        if self._sign == 1:
            for i in range(bisect_left(keys, (share - EPS,)), len(keys)):
                yield self._nodes[keys[i][3]]
            return
        for key in keys:
            if -key[0] < share - EPS:
                return
            yield self._nodes[key[3]]

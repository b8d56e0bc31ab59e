"""Spreading: each pod goes to the emptiest node it fits, fractions to the
emptiest device, so load (and a node's failure) is shared out.

Emptiest means, for a pod that wants GPUs, the most GPU share free, then the
fewest pods, the most CPU and memory free; for a pod that wants none, the
fewest pods first, then the same.  The pod count matters because pods that
request nothing (no CPU, memory or GPU) change no free row: by free resources
alone every one of them would land on the same node.

Node key: (free GPU share negated, pods, free CPU and memory negated, name),
so the node with the most share free sorts first and ties go to the name.
Candidates for a GPU pod stop at the first node with too little share free:
every later one has less.  For a pod without GPUs every node qualifies, and
they come fewest pods first: the best in one pass over the keys, the rest
sorted only when that one did not fit.  Free values are rounded to 9 places
as in ``binpack``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ringleader.sched.nodes import CPU, EPS, MEMORY, SHARE, NodeState
from ringleader.sched.policies import NodeKey, PlacementPolicy

PODS = 1  # where the key holds the node's pod count


def node_key(node: NodeState) -> NodeKey:
    free = node.free
    return (-round(free[SHARE], 9), node.pods[0], -round(free[CPU], 9), -free[MEMORY], node.name)


def _fewest_pods(key: NodeKey) -> tuple[int, NodeKey]:
    return key[PODS], key


def candidates(keys: Sequence[NodeKey], share: float) -> Iterator[str]:
    if share <= EPS:  # no GPU wanted: the fewest pods first
        if not keys:
            return
        best = min(keys, key=_fewest_pods)
        yield best[-1]
        yield from (key[-1] for key in sorted(keys, key=_fewest_pods) if key is not best)
        return
    for key in keys:
        if -key[0] < share - EPS:
            return
        yield key[-1]


def device_rank(used: float, position: int) -> float:
    # The emptiest device first: fractions land on separate devices while
    # there are any.
    return used


POLICY = PlacementPolicy(
    name="spread",
    node_key=node_key,
    candidates=candidates,
    device_rank=device_rank,
    per_node_candidates=True,
)

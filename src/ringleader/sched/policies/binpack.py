"""Bin-packing: each pod goes to the fullest node it fits, fractions to the
fullest device, so whole nodes and whole devices stay free for big gangs.

Node key: (free GPU share, free CPU, free memory, name), ascending, so the
node with the least free sorts first.  Candidates start at the first node
with enough share free (a bisection on the key's first item), which skips
every node too full for the pod without looking at it.  Free values are
rounded to 9 places so that sums of fractions that differ only by float
noise rank as equal and fall back to the name.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence

from ringleader.sched.nodes import CPU, EPS, MEMORY, SHARE, NodeState
from ringleader.sched.policies import NodeKey, PlacementPolicy


def node_key(node: NodeState) -> NodeKey:
    free = node.free
    return (round(free[SHARE], 9), round(free[CPU], 9), free[MEMORY], node.name)


def candidates(keys: Sequence[NodeKey], share: float) -> Iterator[str]:
    for i in range(bisect_left(keys, (share - EPS,)), len(keys)):
        yield keys[i][3]


def device_rank(used: float, position: int) -> float:
    # The fullest device first: partly used devices fill up before a fresh
    # one is broken into.
    return -used


POLICY = PlacementPolicy(
    name="binpack",
    node_key=node_key,
    candidates=candidates,
    device_rank=device_rank,
    per_node_candidates=True,
)

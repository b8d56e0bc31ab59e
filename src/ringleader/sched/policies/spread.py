"""Spreading: each pod goes to the emptiest node it fits, fractions to the
emptiest device, so load (and a node's failure) is shared out.

Node key: (free GPU share, free CPU, free memory) negated, then the name, so
the node with the most free sorts first and ties go to the name.  Candidates
stop at the first node with too little share free: every later one has
less.  Free values are rounded to 9 places as in ``binpack``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ringleader.sched.nodes import CPU, EPS, MEMORY, SHARE, NodeState
from ringleader.sched.policies import NodeKey, PlacementPolicy


def node_key(node: NodeState) -> NodeKey:
    free = node.free
    return (-round(free[SHARE], 9), -round(free[CPU], 9), -free[MEMORY], node.name)


def candidates(keys: Sequence[NodeKey], share: float) -> Iterator[str]:
    for key in keys:
        if -key[0] < share - EPS:
            return
        yield key[3]


def device_rank(used: float, position: int) -> float:
    # The emptiest device first: fractions land on separate devices while
    # there are any.
    return used


POLICY = PlacementPolicy(
    name="spread",
    node_key=node_key,
    candidates=candidates,
    device_rank=device_rank,
)

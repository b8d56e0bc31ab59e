"""The placement-policy registry: which node, and which devices, a pod gets.

Nomenclature:
- *placement policy*: a :class:`PlacementPolicy`, three hooks under a
  ``name``; ``Snapshot.strategy`` (and ``ringleader server --placement``)
  names one.  Built in: ``binpack`` (fill the fullest node that fits) and
  ``spread`` (the emptiest, counting pods too);
- *node key*: ``policy.node_key(node)``, a tuple whose last item is the
  node's name.  ``nodes.NodeOrder`` keeps each pool's ready nodes sorted by
  it, so the best node for the policy sorts first and ties go to the name;
- *candidates*: ``policy.candidates(keys, share)``, the names of the nodes a
  pod needing ``share`` of a GPU may fit on, best first, from the sorted
  keys;
- *device rank*: ``policy.device_rank(used, position)``, how good a device
  with ``used`` share taken is for a fraction; lowest first, ties to the
  device position (``placement.devices_for`` adds it).

Invariants a policy keeps (the scheduler's decisions rest on them):
- ``node_key`` depends only on the node's free row, pod count and name, so
  the order moves, through the journal, exactly when one of them does;
- ``candidates`` yields every node with at least ``share`` of GPU free, best
  first (key order, or an order it derives from the keys alone, as spread's
  fewest-pods-first for a pod without GPUs); it may yield others (the
  caller checks each node), and it should stop or skip early, since the
  first node that fits is taken: that is why a placement looks at few nodes
  however large the pool;
- ``candidates`` is read lazily while the order stands still: the caller
  takes the first node that fits before it changes any free row;
- hooks are pure: no state, no clock, no I/O.

Adding a policy is one module that builds a :class:`PlacementPolicy` and
one line in the built-ins of ``_REGISTRY`` (or a :func:`register` call from a plug-in or a
test; the registry is per process, so a plug-in's module must be imported
in the server's process before it starts).  Built-ins are imported on
first use, so this module imports nothing of the scheduler and ``model``
can validate names against it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ringleader.plugins import LazyRegistry

if TYPE_CHECKING:
    from ringleader.sched.nodes import NodeState

# Sortable, the node's name last (ties, and how NodeOrder finds the node).
NodeKey = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class PlacementPolicy:
    """One placement strategy: its name and its three hooks (see the module doc).

    Plain functions in fields rather than methods to override: a policy is
    data one module builds, and the placement loop calls ``device_rank``
    per device, where a bound method per call would be measurable.
    """

    name: str  # ``Snapshot.strategy``, ``ringleader server --placement NAME``
    # The node's sort key: best for this policy first, its name last.
    node_key: Callable[[NodeState], NodeKey]
    # Names of the nodes, from the sorted keys, that may hold ``share``, best first.
    candidates: Callable[[Sequence[NodeKey], float], Iterator[str]]
    # A device's rank for a fraction: lowest first; ties go to the position.
    device_rank: Callable[[float, int], float]
    # True when whether ``candidates`` yields a node depends on that node's key
    # alone (not on the other nodes'): then a node whose free row did not change
    # stays in or out, which lets reclaim skip trials that cannot succeed.
    per_node_candidates: bool = False


# name -> "module:attribute" of a built-in, imported on first use.
_REGISTRY: LazyRegistry[PlacementPolicy] = LazyRegistry(
    "placement policy",
    {
        "binpack": "ringleader.sched.policies.binpack:POLICY",
        "spread": "ringleader.sched.policies.spread:POLICY",
    },
)


def register(policy: PlacementPolicy) -> PlacementPolicy:
    """Add ``policy`` under its name; a name already taken is an error."""
    name = policy.name
    if not name or name != name.lower() or not name.isprintable() or " " in name:
        raise ValueError(f"placement policy names are lowercase words: {name!r}")
    return _REGISTRY.add(name, policy)


def unregister(name: str) -> None:
    """Remove a policy (a plug-in's tests clean up after themselves)."""
    _REGISTRY.remove(name)


def names() -> list[str]:
    """Registered policy names, built-ins first."""
    return _REGISTRY.names()


def get(name: str) -> PlacementPolicy:
    """The policy ``name``; an unknown name is a ValueError naming the known ones."""
    policy = _REGISTRY.find(name)
    if policy is None:
        known = ", ".join(_REGISTRY.names())
        raise ValueError(f"unknown placement strategy {name!r}; known policies: {known}")
    return policy

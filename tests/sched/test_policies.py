"""Placement policies are plug-ins: a policy registered here, in the test,
decides where the scheduler puts pods, through the same hooks as the
built-in binpack and spread; the registry refuses clashes and names the
known policies when a snapshot asks for an unknown one."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest

from ringleader.sched import GpuShare, PodBinding, Snapshot, policies, schedule
from ringleader.sched.nodes import NodeState
from ringleader.sched.policies import NodeKey, PlacementPolicy
from tests.sched.helpers import binding, gpu_node, job, project

TOY = "lowest-name-first"


def _by_name(node: NodeState) -> NodeKey:
    return (node.name,)


def _every_node(keys: Sequence[NodeKey], share: float) -> Iterator[str]:
    # The key says nothing about free share, so every node is a candidate:
    # the placement loop checks each one (slower, never wrong).
    return (key[-1] for key in keys)


def _by_position(used: float, position: int) -> float:
    return float(position)


@pytest.fixture
def lowest_name_first() -> Iterator[PlacementPolicy]:
    policy = policies.register(
        PlacementPolicy(
            name=TOY,
            node_key=_by_name,
            candidates=_every_node,
            device_rank=_by_position,
        )
    )
    yield policy
    policies.unregister(TOY)


def three_nodes_partly_used() -> Snapshot:
    """node-a: fractions of 0.25 on device 0 and 0.5 on device 1 (3.25 GPUs
    free); node-b: two whole devices taken (2 free, the fullest); node-c:
    empty (the emptiest).  A quarter-GPU notebook is pending."""
    quarter, half = (
        replace(job(wid, "a", portion=share), bindings=(bound,))
        for wid, share, bound in (
            ("q", 0.25, PodBinding("q-0", "node-a", (GpuShare(0, 0.25),))),
            ("h", 0.5, PodBinding("h-0", "node-a", (GpuShare(1, 0.5),))),
        )
    )
    whole = replace(job("w", "a", gpus=2), bindings=(binding("w-0", "node-b", 0, 1),))
    return Snapshot(
        nodes=tuple(gpu_node(name, 4) for name in ("node-a", "node-b", "node-c")),
        projects=(project("a", 12),),
        workloads=(quarter, half, whole, job("new", "a", portion=0.25, at=1)),
    )


@pytest.mark.parametrize(
    ("strategy", "node", "device"),
    [
        ("binpack", "node-b", 2),  # the fullest node; its fullest device with room
        ("spread", "node-c", 0),  # the emptiest node
        # By name, then by position: node-a's device 0, not the fuller device 1
        # (binpack's pick there) nor an empty one (spread's).
        (TOY, "node-a", 0),
    ],
)
def test_the_registered_policy_decides_node_and_device(
    lowest_name_first: PlacementPolicy, strategy: str, node: str, device: int
) -> None:
    decisions = schedule(replace(three_nodes_partly_used(), strategy=strategy))
    (pod,) = decisions.placement("new").pods
    assert (pod.node, [g.index for g in pod.gpus]) == (node, [device])


def test_a_toy_policy_places_a_gang_by_name(lowest_name_first: PlacementPolicy) -> None:
    nodes = tuple(gpu_node(name, 2) for name in ("node-c", "node-b", "node-a"))
    decisions = schedule(
        Snapshot(
            nodes=nodes,
            projects=(project("a", 6),),
            workloads=(job("g", "a", pods=3),),
            strategy=TOY,
        )
    )
    assert [(p.node, [g.index for g in p.gpus]) for p in decisions.placement("g").pods] == [
        ("node-a", [0]),
        ("node-a", [1]),
        ("node-b", [0]),
    ]


def test_unknown_policy_names_the_registered_ones(lowest_name_first: PlacementPolicy) -> None:
    with pytest.raises(ValueError, match=f"'random'; known policies: binpack, spread, {TOY}$"):
        Snapshot(strategy="random")
    assert policies.names() == ["binpack", "spread", TOY]


def test_unregistered_policy_is_refused_again(lowest_name_first: PlacementPolicy) -> None:
    Snapshot(strategy=TOY)
    policies.unregister(TOY)
    with pytest.raises(ValueError, match="unknown placement strategy"):
        Snapshot(strategy=TOY)


def test_a_taken_or_malformed_name_is_refused() -> None:
    spread = policies.get("spread")
    with pytest.raises(ValueError, match="already registered"):
        policies.register(spread)
    with pytest.raises(ValueError, match="lowercase"):
        policies.register(replace(spread, name="Spread Out"))
    assert policies.names() == ["binpack", "spread"]

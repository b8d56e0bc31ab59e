"""Placement policies are plug-ins: a policy registered here, in the test,
decides where the scheduler puts pods, through the same hooks as the
built-in binpack and spread; the registry refuses clashes and names the
known policies when a snapshot asks for an unknown one."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest

from ringleader.sched import (
    GpuShare,
    Node,
    PodBinding,
    PodRequest,
    Snapshot,
    Workload,
    policies,
    schedule,
)
from ringleader.sched.nodes import NodeState
from ringleader.sched.policies import NodeKey, PlacementPolicy
from tests.sched.helpers import GiB, binding, gpu_node, job, project

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


def bare(wid: str, pods: int, at: float = 0.0, **kw: object) -> Workload:
    """A gang whose pods request nothing: no CPU, memory or GPU."""
    requests = tuple(PodRequest(f"{wid}-{i}") for i in range(pods))
    return Workload(wid, "a", requests, submitted_at=at, **kw)  # type: ignore[arg-type]


def nodes_of(decisions: object, wid: str) -> list[str]:
    return [p.node for p in decisions.placement(wid).pods]  # type: ignore[attr-defined]


def three_ssh_like_nodes() -> tuple[Node, ...]:
    """As SSH nodes are registered: each its own size, GPUs on one of them only."""
    return (
        Node("host-a", 16.0, 64 * GiB, gpu_node("x", 2).gpus),
        Node("host-b", 8.0, 32 * GiB),
        Node("host-c", 4.0, 16 * GiB),
    )


@pytest.mark.parametrize("nodes", ["alike", "unlike"])
def test_spread_puts_pods_that_request_nothing_on_separate_nodes(nodes: str) -> None:
    """The issue's case: a 3-pod gang without requests on three nodes landed on one,
    since such pods change no free row; spreading counts pods, however the nodes
    differ in CPU, memory and GPUs (binpack still keeps the gang together)."""
    cluster = (
        tuple(Node(f"host-{c}", 8.0, 32 * GiB) for c in "abc")
        if nodes == "alike"
        else three_ssh_like_nodes()
    )
    snapshot = Snapshot(nodes=cluster, projects=(project("a", 0),), workloads=(bare("g", 3),))
    spread = schedule(replace(snapshot, strategy="spread"))
    assert sorted(nodes_of(spread, "g")) == ["host-a", "host-b", "host-c"]
    binpack = schedule(snapshot)
    assert len(set(nodes_of(binpack, "g"))) == 1


def test_spread_counts_the_pods_already_running_and_fills_evenly() -> None:
    """Pods running on a node count: host-a runs two, so four new pods go two
    each to host-b and host-c, and every node ends with two."""
    running = replace(
        bare("r", 2), bindings=(PodBinding("r-0", "host-a", ()), PodBinding("r-1", "host-a", ()))
    )
    decisions = schedule(
        Snapshot(
            nodes=three_ssh_like_nodes(),
            projects=(project("a", 0),),
            workloads=(running, bare("g", 4, at=1)),
            strategy="spread",
        )
    )
    placed = nodes_of(decisions, "g")
    assert sorted(placed) == ["host-b", "host-b", "host-c", "host-c"], placed


def test_spread_still_puts_gpu_pods_where_most_gpu_share_is_free() -> None:
    """GPU pods go by free share first, pod count after: a node running two CPU
    pods but with every GPU free is emptier for them than one with fewer pods
    and a GPU taken."""
    busy_cpu = replace(
        bare("cpu", 2),
        bindings=(PodBinding("cpu-0", "node-a", ()), PodBinding("cpu-1", "node-a", ())),
    )
    one_gpu = replace(job("g1", "a"), bindings=(binding("g1-0", "node-b", 0),))
    decisions = schedule(
        Snapshot(
            nodes=(gpu_node("node-a", 2), gpu_node("node-b", 2)),
            projects=(project("a", 4),),
            workloads=(busy_cpu, one_gpu, job("new", "a", at=1)),
            strategy="spread",
        )
    )
    assert nodes_of(decisions, "new") == ["node-a"]


def test_a_gang_that_did_not_fit_leaves_no_pod_counted() -> None:
    """A trial that placed a pod and was rolled back counts nothing: the bare gang
    after it goes to the nodes with the fewest pods as they really are."""
    nodes = (
        Node("a", 16.0, 64 * GiB, gpu_node("x", 1).gpus),  # the big gang's first pod lands here
        Node("b", 4.0, 64 * GiB, gpu_node("x", 1).gpus),  # too few cores for its second
        Node("c", 16.0, 64 * GiB),
    )
    big = job("big", "a", pods=2, cpu=8.0)
    decisions = schedule(
        Snapshot(
            nodes=nodes,
            projects=(project("a", 2),),
            workloads=(big, bare("light", 4, at=1)),
            strategy="spread",
        )
    )
    assert decisions.placement("big") is None
    # Fewest pods, then most share and CPU free: one each, then a again (a node that
    # still counted the big gang's pod would send the fourth to b).
    assert nodes_of(decisions, "light") == ["a", "b", "c", "a"]

"""The scheduler's shortcuts change no decision (hypothesis, random clusters).

Each shortcut has a plain counterpart kept for these tests: the faster way of
choosing victims (per-project candidate streams, trials skipped where a
release provably leaves a miss a miss) against the plain loop, and the
incremental cycle (only what changed since the last cycle is worked out
again) against a full one, over random sequences of changes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from ringleader.sched import (
    Department,
    Gpu,
    IncrementalScheduler,
    Limits,
    Node,
    PoolQuota,
    Quota,
    Snapshot,
    Workload,
    deferral,
    preemption,
    schedule,
)
from ringleader.sched.scheduler import _Cycle
from tests.helpers.sched_strategies import FAST, clusters
from tests.sched.helpers import GiB, apply, binding, gpu_node, job, project


def without(shortcut: str, snapshot):
    """``schedule(snapshot)`` with one of ``_Cycle``'s shortcuts switched off."""
    setattr(_Cycle, shortcut, False)
    try:
        return schedule(snapshot)
    finally:
        setattr(_Cycle, shortcut, True)


def plain_victims(snapshot):
    return without("fast_victims", snapshot)


@FAST
@given(clusters)
def test_fast_victim_choice_changes_no_decision(case) -> None:
    """Crowded clusters reclaim and preempt; every cycle's decisions and reasons
    equal the plain loop's, to the last float of every reason."""
    snapshot, arrivals = case
    for arrived in [[], *arrivals]:
        snapshot = replace(snapshot, workloads=snapshot.workloads + tuple(arrived))
        fast = schedule(snapshot)
        assert fast == plain_victims(snapshot)
        snapshot = apply(snapshot, fast)


@st.composite
def full_clusters(draw: st.DrawFn) -> tuple[Snapshot, list[Workload]]:
    """A cluster filled by two over-quota projects' small preemptible work (whole
    GPUs, portions, GPU memory, some pairs), then in-quota work of a third project
    and higher priorities of the first: reclaim and priority preemption with many
    candidates, some in the reclaiming project's department."""
    nodes = tuple(
        Node(
            f"node-{i}",
            32.0,
            256 * GiB,
            tuple(
                Gpu(g, draw(st.sampled_from([40, 80])) * GiB)
                for g in range(draw(st.integers(1, 4)))
            ),
            ready=draw(st.booleans() | st.just(True)),
        )
        for i in range(draw(st.integers(2, 5)))
    )
    gpus = sum(len(n.gpus) for n in nodes)
    shared = draw(st.booleans())
    departments = (
        Department("dept", {"default": Limits(gpu=draw(st.none() | st.integers(gpus // 2, gpus)))}),
    )
    projects = (
        project(
            "over-0",
            gpu=draw(st.integers(0, 1)),
            weight=draw(st.integers(1, 3)),
            department="dept" if shared else None,
        ),
        project("over-1", gpu=0, weight=draw(st.integers(0, 3))),
        project(
            "under", gpu=max(1, gpus // 2), limit=draw(st.none() | st.just(gpus)), department="dept"
        ),
    )
    filler = []
    for i in range(draw(st.integers(4, 24))):
        kind = draw(st.sampled_from(["whole", "whole", "portion", "memory"]))
        filler.append(
            job(
                f"fill-{i:02d}",
                draw(st.sampled_from(["over-0", "over-1"])),
                gpus=draw(st.integers(1, 2)),
                pods=draw(st.sampled_from([1, 1, 1, 2])),
                at=float(draw(st.integers(0, 9))),
                portion=draw(st.sampled_from([0.25, 0.5])) if kind == "portion" else None,
                gpu_memory=draw(st.sampled_from([10, 20])) * GiB if kind == "memory" else None,
                priority=draw(st.sampled_from([50, 50, 75])),
                preemptible=True,
            )
        )
    arrivals = [
        job(
            f"new-{i}",
            draw(st.sampled_from(["under", "under", "over-0"])),
            gpus=draw(st.integers(1, 4)),
            pods=draw(st.integers(1, 2)),
            at=10.0 + i,
            priority=draw(st.sampled_from([50, 75, 100])),
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    first = Snapshot(
        nodes,
        projects,
        tuple(filler),
        departments,
        strategy=draw(st.sampled_from(["binpack", "spread"])),
    )
    return first, arrivals


@FAST
@given(full_clusters(), st.sampled_from([0, 1, 2, 32]))
def test_fast_victim_choice_on_full_clusters(case, alone: int) -> None:
    """Many candidates, and fewer of them tried alone (``SINGLE_TRIALS``), so the
    greedy pass (and its skipped trials) decides: the same victims as the plain loop."""
    first, arrivals = case
    running = apply(first, schedule(first))
    snapshot = replace(running, workloads=running.workloads + tuple(arrivals))
    saved = preemption.SINGLE_TRIALS
    preemption.SINGLE_TRIALS = alone
    try:
        fast = schedule(snapshot)
        event(f"preemptions: {min(len(fast.preemptions), 3)}")
        assert fast == plain_victims(snapshot)
    finally:
        preemption.SINGLE_TRIALS = saved


@pytest.mark.parametrize("pods", [1, 2])
def test_deferred_victims_change_no_decision_and_are_deferred(monkeypatch, pods: int) -> None:
    """A full cluster of one-GPU work of two over-quota projects, the newest of it
    on three nodes in turn; whole-node requests of an in-quota project reclaim
    (gangs of one pod, or of two alike pods: a node each).
    The candidates drawn before a node comes free are deferred
    (``sched.deferral``), those on the node that does are given back, the rest
    left out: the victims, placements and reasons equal those of the search that
    releases every candidate whole, and of the plain loop."""
    deferred = []
    defer = deferral.DeferredReleases.defer

    def counted(self, candidate):
        done = defer(self, candidate)
        deferred.append(done)
        return done

    monkeypatch.setattr(deferral.DeferredReleases, "defer", counted)
    monkeypatch.setattr(preemption, "SINGLE_TRIALS", 0)  # the greedy pass decides
    nodes = tuple(gpu_node(f"node-{n}", gpus=4) for n in range(6))
    projects = (project("over-a", gpu=0), project("over-b", gpu=0), project("under", gpu=20))
    running = []
    for n in range(6):
        for slot in range(4):
            # Nodes 3-5 hold the newest pods, their slots interleaved in time.
            at = 100.0 + slot * 3 + (n - 3) if n >= 3 else float(n * 4 + slot)
            name = f"fill-{n}-{slot}"
            fill = job(name, ("over-a", "over-b")[slot % 2], at=at, preemptible=True)
            running.append(replace(fill, bindings=(binding(f"{name}-0", f"node-{n}", slot),)))
    wanted = tuple(
        job(f"whole-{i}", "under", gpus=4, pods=pods, at=200.0 + i) for i in range(4 // pods)
    )
    snapshot = Snapshot(nodes, projects, (*running, *wanted), strategy="binpack")
    fast = schedule(snapshot)
    assert "whole-0" in {p.workload for p in fast.placements}
    assert {"fill-5-0", "fill-5-1", "fill-5-2", "fill-5-3"} <= set(fast.preempted())
    assert deferred.count(True) >= 4, "too few candidates deferred: the test lost its point"
    assert fast == without("defer_victims", snapshot) == plain_victims(snapshot)


CHANGES = ("apply", "arrive", "delete", "edit", "node", "quota", "same", "shuffle", "rebuild")


def change(draw: st.DrawFn, snapshot: Snapshot, decisions, arrivals: list[Workload]) -> Snapshot:
    """One random change between two cycles, as a server would see it."""
    kind = draw(st.sampled_from(CHANGES))
    event(f"change: {kind}")
    if kind == "apply":  # the server carried out the last decisions
        return apply(snapshot, decisions)
    if kind == "arrive" and arrivals:
        return replace(snapshot, workloads=(*snapshot.workloads, arrivals.pop(0)))
    if kind == "delete" and snapshot.workloads:
        gone = draw(st.sampled_from(snapshot.workloads))
        return replace(snapshot, workloads=tuple(w for w in snapshot.workloads if w is not gone))
    if kind == "edit" and snapshot.workloads:  # the same id, other pods (resubmitted)
        edited = draw(st.sampled_from(snapshot.workloads))
        fewer = replace(edited, pods=edited.pods[-1:], min_pods=None, bindings=())
        workloads = tuple(fewer if w is edited else w for w in snapshot.workloads)
        return replace(snapshot, workloads=workloads)
    if kind == "node" and snapshot.nodes:
        node = draw(st.sampled_from(snapshot.nodes))
        nodes = tuple(replace(n, ready=not n.ready) if n is node else n for n in snapshot.nodes)
        return replace(snapshot, nodes=nodes)
    if kind == "quota" and snapshot.projects:
        project = draw(st.sampled_from(snapshot.projects))
        changed = replace(project, quotas={"default": draw(st.sampled_from(QUOTAS))})
        projects = tuple(changed if p is project else p for p in snapshot.projects)
        return replace(snapshot, projects=projects)
    if kind == "shuffle":
        return replace(snapshot, workloads=tuple(reversed(snapshot.workloads)))
    if kind == "rebuild":  # equal values, new objects (a server reads them afresh)
        return replace(snapshot, workloads=tuple(replace(w) for w in snapshot.workloads))
    return snapshot  # "same", or a change with nothing to change


QUOTAS = (
    PoolQuota(gpu=Quota(0.0, None, 1.0)),
    PoolQuota(gpu=Quota(2.0, 4.0, 2.0)),
    PoolQuota(gpu=Quota(8.0, None, 0.0)),
)


@FAST
@given(clusters, st.data())
def test_incremental_cycle_decides_as_a_full_one(case, data) -> None:
    """Random clusters through random sequences of changes (decisions carried out,
    arrivals, deletions, a workload resubmitted under its id, nodes going up or
    down, quotas, the same snapshot again, reordered, rebuilt): each incremental
    cycle equals a full one."""
    snapshot, waves = case
    arrivals = [w for wave in waves for w in wave]
    scheduler = IncrementalScheduler()
    for _ in range(data.draw(st.integers(1, 8))):
        decisions = scheduler.schedule(snapshot)
        assert decisions == schedule(snapshot)
        snapshot = change(data.draw, snapshot, decisions, arrivals)
    assert scheduler.schedule(snapshot) == schedule(snapshot)


def test_an_unchanged_snapshot_reuses_the_last_answer() -> None:
    """What the incremental cycle reuses: all of it for the same snapshot, the
    unchanged workloads' gangs and estimates after a change."""
    from tests.sched.helpers import gpu_node

    first = Snapshot(
        nodes=(gpu_node("n1", gpus=2),),
        projects=(project("p", gpu=2),),
        workloads=(job("a", "p", gpus=1, at=1.0), job("b", "p", gpus=2, at=2.0)),
    )
    scheduler = IncrementalScheduler()
    decided = scheduler.schedule(first)
    assert scheduler.reused == {"gangs": 0, "estimates": 0, "workloads": 0}
    assert scheduler.schedule(replace(first)) is decided
    assert scheduler.reused == {"decisions": 1}
    later = replace(
        apply(first, decided), workloads=(*apply(first, decided).workloads, job("c", "p"))
    )
    assert scheduler.schedule(later) == schedule(later)
    assert scheduler.reused["workloads"] == 1  # b: still pending, as it was; a now runs
    assert scheduler.reused["gangs"] == 1

"""Scenarios from Run:ai's documentation, each a small cluster and a known outcome."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ringleader.sched import (
    BUILD,
    BUILD_PREEMPTIBLE,
    INFERENCE,
    TRAIN,
    Department,
    Limits,
    PoolQuota,
    Project,
    Quota,
    Snapshot,
    Workload,
    schedule,
)
from tests.sched.helpers import (
    GiB,
    binding,
    bound_nodes,
    gpu_node,
    gpus_by_project,
    job,
    project,
    settle,
)

EIGHT_GPUS = {
    "one node of 8": (gpu_node("node-1", 8),),
    "two nodes of 4": (gpu_node("node-1", 4), gpu_node("node-2", 4)),
}


def demand(proj: str, count: int = 10, start: float = 0.0) -> list:
    return [job(f"{proj}-{i}", proj, at=start + i) for i in range(count)]


@pytest.mark.parametrize("nodes", EIGHT_GPUS.values(), ids=EIGHT_GPUS.keys())
@pytest.mark.parametrize(("weights", "expected"), [((1, 1), (5, 3)), ((3, 1), (6, 2))])
def test_over_quota_capacity_is_shared_by_weight(nodes, weights, expected) -> None:
    snapshot = Snapshot(
        nodes=nodes,
        projects=(project("a", 3, weight=weights[0]), project("b", 1, weight=weights[1])),
        workloads=(*demand("a"), *demand("b")),
    )
    used = gpus_by_project(settle(snapshot))
    assert (used["a"], used["b"]) == expected


@pytest.mark.parametrize(("weights", "expected"), [((1, 1), (5, 3)), ((3, 1), (6, 2))])
def test_late_project_reclaims_up_to_its_fair_share(weights, expected) -> None:
    """A took the whole cluster while B was idle; B's demand takes its share back."""
    nodes = (gpu_node("node-1", 8),)
    projects = (project("a", 3, weight=weights[0]), project("b", 1, weight=weights[1]))
    alone = settle(Snapshot(nodes=nodes, projects=projects, workloads=tuple(demand("a"))))
    assert gpus_by_project(alone)["a"] == 8
    both = replace(alone, workloads=alone.workloads + tuple(demand("b", start=100)))
    used = gpus_by_project(settle(both))
    assert (used["a"], used["b"]) == expected


def test_project_within_deserved_quota_reclaims_from_over_quota_work() -> None:
    nodes = (gpu_node("node-1", 8),)
    running = tuple(
        replace(job(f"a-{i}", "a", at=i), bindings=(binding(f"a-{i}-0", "node-1", i),))
        for i in range(8)
    )
    snapshot = Snapshot(
        nodes=nodes,
        projects=(project("a", 3), project("b", 1)),
        workloads=(*running, job("b-0", "b", at=100)),
    )
    decisions = schedule(snapshot)
    assert decisions.preempted() == ("a-7",)  # one workload, the newest
    (preemption,) = decisions.preemptions
    assert preemption.for_workload == "b-0"
    assert "project b" in preemption.reason and "project a" in preemption.reason
    assert bound_nodes(decisions, "b-0") == ["node-1"]
    assert decisions.placement("b-0").pods[0].gpus[0].index == 7


def test_reclaim_never_takes_a_non_preemptible_workload() -> None:
    nodes = (gpu_node("node-1", 2),)
    running = replace(
        job("a-big", "a", gpus=2, priority=INFERENCE),
        bindings=(binding("a-big-0", "node-1", 0, 1),),
    )
    snapshot = Snapshot(
        nodes=nodes,
        projects=(project("a", 0), project("b", 1)),
        workloads=(running, job("b-0", "b", at=5)),
    )
    decisions = schedule(snapshot)
    assert decisions.preemptions == ()
    assert decisions.pending_reason("b-0")


def test_fractions_share_a_device_until_full() -> None:
    nodes = (gpu_node("node-1", 2),)
    workloads = (
        job("half", "a", portion=0.5, at=1),
        job("q1", "a", portion=0.25, at=2),
        job("q2", "a", portion=0.25, at=3),
        job("q3", "a", portion=0.25, at=4),
    )
    decisions = schedule(Snapshot(nodes=nodes, projects=(project("a", 2),), workloads=workloads))
    devices = {
        w.id: [(g.index, g.share) for g in decisions.placement(w.id).pods[0].gpus]
        for w in workloads
    }
    shared = devices["half"][0][0]
    assert devices["half"] == [(shared, 0.5)]
    assert devices["q1"] == devices["q2"] == [(shared, 0.25)]
    assert devices["q3"][0][0] != shared


def test_memory_fraction_is_a_share_of_that_device() -> None:
    decisions = schedule(
        Snapshot(
            nodes=(gpu_node("node-1", 1),),  # one 80 GiB device
            projects=(project("a", 1),),
            workloads=(job("m", "a", gpu_memory=20 * GiB), job("p", "a", portion=0.75, at=1)),
        )
    )
    (share,) = decisions.placement("m").pods[0].gpus
    assert (share.share, share.memory_bytes) == (0.25, 20 * GiB)
    assert decisions.placement("p").pods[0].gpus[0].index == share.index


def test_whole_devices_never_share_with_fractions() -> None:
    decisions = schedule(
        Snapshot(
            nodes=(gpu_node("node-1", 2),),
            projects=(project("a", 2),),
            workloads=(job("frac", "a", portion=0.5), job("whole", "a", gpus=2, at=1)),
        )
    )
    assert decisions.placement("frac") is not None
    assert decisions.placement("whole") is None
    assert "needs 2 whole GPUs on one node" in decisions.pending_reason("whole")


def test_gang_that_cannot_fit_whole_stays_pending_with_the_reason() -> None:
    nodes = (gpu_node("node-1", 4), gpu_node("node-2", 4), gpu_node("node-3", 1))
    other = replace(job("other", "b", gpus=1), bindings=(binding("other-0", "node-2", 0),))
    snapshot = Snapshot(
        nodes=nodes,
        projects=(project("a", 8), project("b", 1)),
        workloads=(other, job("gang", "a", gpus=4, pods=2, at=1)),
    )
    decisions = schedule(snapshot)
    assert decisions.placement("gang") is None
    assert decisions.preemptions == ()
    assert decisions.pending_reason("gang") == (
        "a gang of 2 pods needs 4 whole GPUs per pod in pool default; "
        "1 of 2 fit, then the most free on any node is 3 (node-2)"
    )


def test_higher_priority_preempts_the_projects_own_train_workload() -> None:
    nodes = (gpu_node("node-1", 4),)
    train = replace(job("train", "a", gpus=4), bindings=(binding("train-0", "node-1", 0, 1, 2, 3),))
    for priority in (BUILD, INFERENCE):
        snapshot = Snapshot(
            nodes=nodes,
            projects=(project("a", 4),),
            workloads=(train, job("urgent", "a", gpus=1, priority=priority, at=10)),
        )
        decisions = schedule(snapshot)
        assert decisions.preempted() == ("train",)
        assert "priority" in decisions.preemptions[0].reason
        assert bound_nodes(decisions, "urgent") == ["node-1"]


def test_equal_or_lower_priority_never_preempts_within_a_project() -> None:
    nodes = (gpu_node("node-1", 4),)
    train = replace(job("train", "a", gpus=4), bindings=(binding("train-0", "node-1", 0, 1, 2, 3),))
    snapshot = Snapshot(
        nodes=nodes,
        projects=(project("a", 4),),
        workloads=(train, job("next", "a", gpus=1, priority=TRAIN, at=10)),
    )
    decisions = schedule(snapshot)
    assert decisions.preemptions == ()
    assert decisions.pending_reason("next")


def test_interactive_workload_must_fit_in_deserved_quota() -> None:
    decisions = schedule(
        Snapshot(
            nodes=(gpu_node("node-1", 8),),
            projects=(project("team-a", 1),),
            workloads=(job("notebook", "team-a", gpus=2, priority=BUILD),),
        )
    )
    assert decisions.placement("notebook") is None
    reason = decisions.pending_reason("notebook")
    assert "non-preemptible" in reason and "team-a" in reason and "deserved" in reason
    assert decisions.pending[0].cause == "quota"


def test_preemptible_work_goes_over_quota_but_never_over_the_limit() -> None:
    decisions = schedule(
        Snapshot(
            nodes=(gpu_node("node-1", 8),),
            projects=(project("team-a", 1, limit=2),),
            workloads=tuple(job(f"t{i}", "team-a", at=i) for i in range(4)),
        )
    )
    assert [p.workload for p in decisions.placements] == ["t0", "t1"]
    assert decisions.pending_reason("t2") == "project team-a is at its GPU limit (2 of 2)"
    assert decisions.pending[0].cause == "limit"


def test_department_limit_caps_its_projects() -> None:
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 8),),
        projects=(
            project("a", 4, department="research"),
            project("b", 4, department="research"),
        ),
        departments=(Department("research", {"default": Limits(gpu=5)}),),
        workloads=(*demand("a", 4), *demand("b", 4, start=0.5)),
    )
    used = gpus_by_project(settle(snapshot))
    assert used["a"] + used["b"] == 5
    decisions = schedule(settle(snapshot))
    reasons = {p.reason for p in decisions.pending}
    assert reasons == {"department research is at its GPU limit (5 of 5)"}


def test_node_pools_are_tried_in_the_workloads_order() -> None:
    nodes = (gpu_node("a100-1", 2, pool="a100"), gpu_node("v100-1", 2, pool="v100"))
    both = Project("p", {"a100": PoolQuota(gpu=Quota(4)), "v100": PoolQuota(gpu=Quota(4))})
    workloads = tuple(
        job(f"w{i}", "p", gpus=1, at=i, node_pools=("v100", "a100")) for i in range(3)
    )
    decisions = schedule(Snapshot(nodes=nodes, projects=(both,), workloads=workloads))
    assert [decisions.placement(w.id).pool for w in workloads] == ["v100", "v100", "a100"]
    assert bound_nodes(decisions, "w2") == ["a100-1"]


def test_workload_without_pools_tries_default_first() -> None:
    nodes = (gpu_node("z-1", 2, pool="alpha"), gpu_node("d-1", 2))
    decisions = schedule(
        Snapshot(nodes=nodes, projects=(project("a", 2),), workloads=(job("w", "a"),))
    )
    assert decisions.placement("w").pool == "default"


@pytest.mark.parametrize(("strategy", "distinct_nodes"), [("binpack", 1), ("spread", 2)])
def test_spread_or_binpack(strategy, distinct_nodes) -> None:
    nodes = (gpu_node("node-1", 4), gpu_node("node-2", 4))
    workloads = (job("w0", "a"), job("w1", "a", at=1))
    decisions = schedule(
        Snapshot(nodes=nodes, projects=(project("a", 8),), workloads=workloads, strategy=strategy)
    )
    used = {p.pods[0].node for p in decisions.placements}
    assert len(used) == distinct_nodes


def test_binpack_fills_the_fuller_node_first() -> None:
    nodes = (gpu_node("node-1", 4), gpu_node("node-2", 4))
    running = replace(job("r", "a"), bindings=(binding("r-0", "node-2", 0),))
    decisions = schedule(
        Snapshot(nodes=nodes, projects=(project("a", 8),), workloads=(running, job("w", "a", at=1)))
    )
    assert bound_nodes(decisions, "w") == ["node-2"]


def test_elastic_gang_runs_with_its_minimum_and_takes_what_fits() -> None:
    decisions = schedule(
        Snapshot(
            nodes=(gpu_node("node-1", 3),),
            projects=(project("a", 8),),
            workloads=(job("elastic", "a", gpus=1, pods=5, min_pods=2),),
        )
    )
    placement = decisions.placement("elastic")
    assert [p.pod for p in placement.pods] == ["elastic-0", "elastic-1", "elastic-2"]


def test_not_ready_node_gets_no_pods() -> None:
    nodes = (gpu_node("node-1", 8, ready=False),)
    decisions = schedule(
        Snapshot(nodes=nodes, projects=(project("a", 1),), workloads=(job("w", "a"),))
    )
    assert decisions.pending_reason("w") == "no ready node in pool default (1 not ready)"


def test_unknown_project_is_a_pending_reason() -> None:
    decisions = schedule(
        Snapshot(nodes=(gpu_node("node-1"),), projects=(), workloads=(job("w", "ghost"),))
    )
    assert decisions.pending_reason("w") == "project ghost does not exist"


def test_reclaim_takes_the_fewest_workloads_before_the_newest() -> None:
    running = (
        replace(job("a-big", "a", gpus=2, at=0), bindings=(binding("a-big-0", "node-1", 0, 1),)),
        replace(job("a-s1", "a", at=1), bindings=(binding("a-s1-0", "node-1", 2),)),
        replace(job("a-s2", "a", at=2), bindings=(binding("a-s2-0", "node-1", 3),)),
    )
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 4),),
        projects=(project("a", 1), project("b", 2)),
        workloads=(*running, job("b-0", "b", gpus=2, at=5)),
    )
    assert schedule(snapshot).preempted() == ("a-big",)


def test_reclaim_takes_the_newest_when_several_are_needed() -> None:
    running = tuple(
        replace(job(f"a-{i}", "a", at=i), bindings=(binding(f"a-{i}-0", "node-1", i),))
        for i in range(4)
    )
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 4),),
        projects=(project("a", 0), project("b", 3)),
        workloads=(*running, job("b-0", "b", gpus=3, at=5)),
    )
    decisions = schedule(snapshot)
    assert sorted(decisions.preempted()) == ["a-1", "a-2", "a-3"]
    assert bound_nodes(decisions, "b-0") == ["node-1"]


def test_preemptible_work_uses_free_capacity_before_preempting_its_own() -> None:
    train = replace(job("train", "a", gpus=2), bindings=(binding("train-0", "node-1", 0, 1),))
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 8),),
        projects=(project("a", 2),),
        workloads=(train, job("build", "a", priority=BUILD_PREEMPTIBLE, at=1)),
    )
    decisions = schedule(snapshot)
    assert decisions.preemptions == ()
    assert bound_nodes(decisions, "build") == ["node-1"]


def test_priority_never_preempts_across_projects() -> None:
    train = replace(job("train", "a", gpus=4), bindings=(binding("train-0", "node-1", 0, 1, 2, 3),))
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 4),),
        projects=(project("a", 4), project("b", 1)),
        workloads=(train, job("nb", "b", priority=INFERENCE, at=1)),
    )
    decisions = schedule(snapshot)
    assert decisions.preemptions == ()  # a is within its deserved quota: nothing to reclaim
    assert decisions.pending_reason("nb").startswith("needs 1 whole GPU on one node")


def test_whole_multi_node_gang_is_preempted_as_one() -> None:
    gang = replace(
        job("gang", "a", gpus=2, pods=2),
        bindings=(binding("gang-0", "node-1", 0, 1), binding("gang-1", "node-2", 0, 1)),
    )
    snapshot = Snapshot(
        nodes=(gpu_node("node-1", 2), gpu_node("node-2", 2)),
        projects=(project("a", 0), project("b", 1)),
        workloads=(gang, job("b-0", "b", at=1)),
    )
    decisions = schedule(snapshot)
    assert decisions.preempted() == ("gang",)
    assert decisions.placement("b-0") is not None


def test_non_preemptible_elastic_pods_stop_at_deserved_quota() -> None:
    decisions = schedule(
        Snapshot(
            nodes=(gpu_node("node-1", 8),),
            projects=(project("a", 3),),
            workloads=(job("serve", "a", pods=5, min_pods=2, priority=INFERENCE),),
        )
    )
    assert len(decisions.placement("serve").pods) == 3


def test_running_workload_of_a_deleted_project_holds_its_devices_until_reclaimed() -> None:
    """No project, no fair share: such work stays put unless it is preemptible."""
    held = (binding("orphan-0", "node-1", 0, 1, 2),)
    for priority, preempted in ((INFERENCE, ()), (TRAIN, ("orphan",))):
        orphan = replace(job("orphan", "gone", gpus=3, priority=priority), bindings=held)
        decisions = schedule(
            Snapshot(
                nodes=(gpu_node("node-1", 4),),
                projects=(project("a", 4),),
                workloads=(orphan, job("w", "a", gpus=2, at=1)),
            )
        )
        assert decisions.preempted() == preempted
        assert (decisions.placement("w") is None) == (not preempted)


def test_spread_puts_fractions_on_separate_devices() -> None:
    decisions = schedule(
        Snapshot(
            nodes=(gpu_node("node-1", 2),),
            projects=(project("a", 2),),
            workloads=(job("f0", "a", portion=0.25), job("f1", "a", portion=0.25, at=1)),
            strategy="spread",
        )
    )
    devices = {decisions.placement(w).pods[0].gpus[0].index for w in ("f0", "f1")}
    assert devices == {0, 1}


def full_of_project_a(*pending: Workload) -> Snapshot:
    """Two nodes of four GPUs full of project a's one-GPU work (a deserves 2 GPUs, b
    6), and ``pending``: b's in-quota work can be placed only by reclaiming from a."""
    running = tuple(
        replace(job(f"a-{i}", "a", at=i), bindings=(binding(f"a-{i}-0", f"node-{i % 2}", i // 2),))
        for i in range(8)
    )
    return Snapshot(
        nodes=(gpu_node("node-0", 4), gpu_node("node-1", 4)),
        projects=(project("a", 2), project("b", 6)),
        workloads=(*running, *pending),
    )


def test_a_reclaim_that_found_no_victims_is_not_searched_again_in_the_same_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two alike in-quota gangs that no reclaim can place (five GPUs on one node, on
    nodes of four): the second, in the same state, is answered from the first's search
    (each search walks every candidate), with the same decisions as searching again.
    Each is searched for in pass 1 (deserved quota) and pass 2 (fair share)."""
    from ringleader.sched import reclaim
    from ringleader.sched.scheduler import _Cycle

    snapshot = full_of_project_a(job("b-0", "b", gpus=5, at=10), job("b-1", "b", gpus=5, at=11))
    searches: list[int] = []
    search = reclaim.choose_victims

    def counted(*args: object, **kwargs: object) -> object:
        searches.append(1)
        return search(*args, **kwargs)

    monkeypatch.setattr(reclaim, "choose_victims", counted)
    remembered = schedule(snapshot)
    assert len(searches) == 2  # b-0's, once a pass; b-1 answered from them
    assert remembered.preemptions == () and remembered.placements == ()
    assert remembered.pending_reason("b-0") == remembered.pending_reason("b-1") != ""
    monkeypatch.setattr(_Cycle, "remember_misses", False)
    searches.clear()
    assert schedule(snapshot) == remembered
    assert len(searches) == 4


def test_a_miss_that_reclaim_mends_is_never_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    """Explaining a miss walks every node of the pool: a workload that reclaim then
    places needs no reason, and one that no reclaim can place gets the reason its miss
    had, worked out once its search found no victims."""
    from ringleader.sched import scheduler
    from ringleader.sched.scheduler import _Cycle

    snapshot = full_of_project_a(job("fits", "b", gpus=2, at=10), job("never", "b", gpus=5, at=11))
    explained: list[str] = []
    explain = scheduler.explain

    def counted(*args: Any) -> str:  # (cluster, pool, pods, shortfall)
        explained.append(args[2][0].name.rsplit("-", 1)[0])
        return explain(*args)

    monkeypatch.setattr(scheduler, "explain", counted)
    late = schedule(snapshot)
    assert [p.workload for p in late.placements] == ["fits"]
    assert len(late.preemptions) == 2
    assert "needs 5 whole GPUs on one node" in late.pending_reason("never")
    assert "fits" not in explained and "never" in explained
    monkeypatch.setattr(_Cycle, "explain_late", False)
    explained.clear()
    assert schedule(snapshot) == late
    assert "fits" in explained  # its miss before the reclaim, explained at once

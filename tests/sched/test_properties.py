"""Properties that hold for any cluster and workload mix (hypothesis).

Each example runs a few cycles: a first cycle on random pending work gives a
valid running state, then more work arrives; the invariants are checked on
every cycle's decisions against the snapshot it saw.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import replace

from hypothesis import event, given
from hypothesis import strategies as st

from ringleader.sched import (
    Decisions,
    Department,
    Limits,
    Node,
    PodRequest,
    PoolQuota,
    Project,
    Quota,
    Snapshot,
    Workload,
    schedule,
)
from ringleader.sched.scheduler import _Cycle
from tests.helpers.sched_strategies import (
    EPS,
    FAST,
    clusters,
    nodes,
    organisation,
    pod_request,
)
from tests.sched.helpers import GiB, apply, settle


@FAST
@given(clusters)
def test_repeated_cycles_settle(case) -> None:
    """Reclaim never ping-pongs: applying decisions reaches a fixed point."""
    snapshot, arrivals = case
    for arrived in [[], *arrivals]:
        snapshot = settle(replace(snapshot, workloads=snapshot.workloads + tuple(arrived)), 10)


def amounts(snapshot: Snapshot, workload: Workload) -> dict[tuple[str, str], float]:
    """(pool, resource) -> what a running workload holds."""
    nodes = {n.name: n for n in snapshot.nodes}
    pods = {p.name: p for p in workload.pods}
    used: dict[tuple[str, str], float] = defaultdict(float)
    for b in workload.bindings:
        pool = nodes[b.node].pool
        used[pool, "gpu"] += sum(g.share for g in b.gpus)
        used[pool, "cpu"] += pods[b.pod].cpu_cores
        used[pool, "memory"] += pods[b.pod].memory_bytes
    return used


def check_capacity(after: Snapshot) -> None:
    nodes = {n.name: n for n in after.nodes}
    cpu: dict[str, float] = defaultdict(float)
    memory: dict[str, float] = defaultdict(float)
    device: dict[tuple[str, int], list[float]] = defaultdict(list)
    for w in after.workloads:
        pods = {p.name: p for p in w.pods}
        for b in w.bindings:
            cpu[b.node] += pods[b.pod].cpu_cores
            memory[b.node] += pods[b.pod].memory_bytes
            assert len({g.index for g in b.gpus}) == len(b.gpus) == pods[b.pod].gpu_devices
            for g in b.gpus:
                device[b.node, g.index].append(g.share)
                if not pods[b.pod].fractional:
                    assert g.share == 1.0
    for name, node in nodes.items():
        assert cpu[name] <= node.cpu_cores + EPS
        assert memory[name] <= node.memory_bytes
    for key, shares in device.items():
        assert sum(shares) <= 1 + EPS, (key, shares)
        assert 1.0 not in shares or len(shares) == 1, (key, shares)


def check_quotas(after: Snapshot) -> None:
    projects = {p.name: p for p in after.projects}
    departments = {d.name: d for d in after.departments}
    project_use: dict[tuple[str, str, str], float] = defaultdict(float)
    firm_use: dict[tuple[str, str, str], float] = defaultdict(float)
    dept_use: dict[tuple[str, str, str], float] = defaultdict(float)
    for w in after.workloads:
        assert w.project in projects or not w.bindings
        for (pool, resource), amount in amounts(after, w).items():
            project_use[w.project, pool, resource] += amount
            if not w.is_preemptible:
                firm_use[w.project, pool, resource] += amount
            department = projects[w.project].department
            if department:
                dept_use[department, pool, resource] += amount
    for (name, pool, resource), used in project_use.items():
        quota = projects[name].quota(pool).of(resource)
        if quota.limit is not None:
            assert used <= quota.limit + EPS, (name, pool, resource)
    for (name, pool, resource), used in firm_use.items():
        deserved = projects[name].quota(pool).of(resource).deserved
        if deserved is not None:
            assert used <= deserved + EPS, ("non-preemptible over quota", name, pool, resource)
    for (name, pool, resource), used in dept_use.items():
        limit = departments[name].limit(pool).of(resource)
        if limit is not None:
            assert used <= limit + EPS, (name, pool, resource)


def check_decisions(before: Snapshot, decisions: Decisions) -> None:
    by_id = {w.id: w for w in before.workloads}
    nodes = {n.name: n for n in before.nodes}
    preempted = decisions.preempted()
    assert len(set(preempted)) == len(preempted)
    for wid in preempted:
        assert by_id[wid].running and by_id[wid].is_preemptible, wid
    placed = [p.workload for p in decisions.placements]
    assert {p.for_workload for p in decisions.preemptions} <= set(placed), "preempted for nothing"
    assert len(set(placed)) == len(placed)
    for placement in decisions.placements:
        w = by_id[placement.workload]
        assert w.id not in preempted
        already = {b.pod for b in w.bindings}
        new = [b.pod for b in placement.pods]
        assert len(set(new)) == len(new) and not already & set(new)
        if not w.running:
            assert len(new) >= w.gang_size, "gang partially placed"
            assert new[: w.gang_size] == [p.name for p in w.pods[: w.gang_size]]
        for b in placement.pods:
            assert nodes[b.node].ready and nodes[b.node].pool == placement.pool
    pending = [p.workload for p in decisions.pending]
    assert len(set(pending)) == len(pending)
    expected = {w.id for w in before.workloads if not w.running} - set(placed)
    assert set(pending) == expected
    assert all(p.reason for p in decisions.pending)


def check_cycle(before: Snapshot) -> Snapshot:
    decisions = schedule(before)
    event(f"placements: {min(len(decisions.placements), 3)}")
    event(f"preemptions: {min(len(decisions.preemptions), 2)}")
    for p in decisions.pending:
        event(f"pending: {p.cause}")
    check_decisions(before, decisions)
    after = apply(before, decisions)
    check_capacity(after)
    check_quotas(after)
    return after


@FAST
@given(clusters)
def test_no_limit_is_exceeded_and_gangs_are_whole(case) -> None:
    snapshot, arrivals = case
    snapshot = check_cycle(snapshot)
    for arrived in arrivals:
        snapshot = check_cycle(replace(snapshot, workloads=snapshot.workloads + tuple(arrived)))


@FAST
@given(clusters, st.randoms(use_true_random=False))
def test_same_snapshot_same_decisions_whatever_the_input_order(case, rng: random.Random) -> None:
    snapshot, arrivals = case
    running = apply(snapshot, schedule(snapshot))
    snapshot = replace(running, workloads=running.workloads + tuple(arrivals[0]))
    shuffled = replace(
        snapshot,
        nodes=tuple(rng.sample(snapshot.nodes, len(snapshot.nodes))),
        projects=tuple(rng.sample(snapshot.projects, len(snapshot.projects))),
        workloads=tuple(rng.sample(snapshot.workloads, len(snapshot.workloads))),
    )
    assert schedule(snapshot) == schedule(snapshot) == schedule(shuffled)


def same_decisions_with_and_without(case, shortcut: str) -> None:
    """Every cycle over the case's arrivals decides the same with ``_Cycle``'s
    ``shortcut`` on (the default) and off, to the last float of every reason."""
    snapshot, arrivals = case
    for arrived in [[], *arrivals]:
        snapshot = replace(snapshot, workloads=snapshot.workloads + tuple(arrived))
        taken = schedule(snapshot)
        setattr(_Cycle, shortcut, False)
        try:
            plain = schedule(snapshot)
        finally:
            setattr(_Cycle, shortcut, True)
        assert taken == plain
        snapshot = apply(snapshot, taken)


@FAST
@given(clusters)
def test_remembered_misses_change_no_decision(case) -> None:
    """A miss answered from memory (same requests, project, pool and rule, in the same
    state) is the miss the trial would find: decisions and reasons are identical."""
    same_decisions_with_and_without(case, "remember_misses")


@FAST
@given(clusters)
def test_reasons_worked_out_after_preemption_failed_are_the_ones_found_before(case) -> None:
    """A miss that preemption may still mend is explained only once no victims were
    found: the state is then the one the miss was found in, so every decision and
    reason equals the cycle's that explains each miss at once."""
    same_decisions_with_and_without(case, "explain_late")


def test_a_remembered_miss_is_only_its_own_projects() -> None:
    """The same request from two projects in the same state: one is over its quota
    (non-preemptible work waits), the other places; neither takes the other's answer."""
    from tests.sched.helpers import gpu_node, job, project

    snapshot = Snapshot(
        nodes=(gpu_node("n1", gpus=2),),
        projects=(project("full", gpu=0), project("room", gpu=2)),
        workloads=(
            job("a", "full", gpus=1, at=1.0, preemptible=False),
            job("b", "room", gpus=1, at=2.0, preemptible=False),
        ),
    )
    decisions = schedule(snapshot)
    assert [p.workload for p in decisions.placements] == ["b"]
    assert [p.workload for p in decisions.pending] == ["a"]
    assert "quota" in decisions.pending[0].reason


def pods_per_node(node: Node, pod: PodRequest) -> int:
    """How many copies of ``pod`` fit on an empty ``node`` (single-device fractions)."""
    fits = [
        math.floor(node.cpu_cores / pod.cpu_cores + EPS) if pod.cpu_cores else 10**6,
        node.memory_bytes // pod.memory_bytes if pod.memory_bytes else 10**6,
    ]
    if pod.fractional:
        per_device = [
            math.floor(1 / pod.gpu_portion + EPS)
            if pod.gpu_portion
            else g.memory_bytes // pod.gpu_memory_bytes
            for g in node.gpus
        ]
        fits.append(sum(per_device))
    elif pod.gpu_devices:
        fits.append(len(node.gpus) // pod.gpu_devices)
    return min(fits)


@st.composite
def idle_cluster_with_fitting_workload(draw: st.DrawFn) -> tuple[Snapshot, Workload]:
    first, *rest = draw(nodes())
    cluster = (replace(first, ready=True), *rest)
    pool = first.pool
    pod = draw(pod_request("w-0"))
    if pod.fractional:
        pod = replace(pod, gpu_devices=1)
    if pods_per_node(cluster[0], pod) == 0:
        pod = PodRequest("w-0", cpu_cores=0.5, memory_bytes=GiB)
    room = sum(pods_per_node(n, pod) for n in cluster if n.pool == pool and n.ready)
    count = min(draw(st.integers(1, 4)), room)
    workload = Workload(
        "w",
        "team",
        tuple(replace(pod, name=f"w-{k}") for k in range(count)),
        priority=draw(st.sampled_from([50, 75, 100, 125])),
        min_pods=draw(st.integers(1, count)),
        node_pools=(pool,),
    )
    gpus = float(count * pod.gpu_devices)
    team = Project(
        "team",
        {
            pool: PoolQuota(
                gpu=Quota(gpus, draw(st.none() | st.just(gpus))),
                cpu=Quota(count * pod.cpu_cores),
                memory=Quota(count * pod.memory_bytes),
            )
        },
        "dept",
    )
    projects, departments = draw(organisation())
    limit = Limits(gpu=gpus + draw(st.integers(0, 2)))
    snapshot = Snapshot(
        nodes=cluster,
        projects=(team, *projects),
        departments=(Department("dept", {pool: limit}), *departments),
        workloads=(workload,),
        strategy=draw(st.sampled_from(["binpack", "spread"])),
    )
    return snapshot, workload


@FAST
@given(idle_cluster_with_fitting_workload())
def test_workload_within_deserved_quota_on_idle_cluster_is_admitted(case) -> None:
    snapshot, workload = case
    decisions = schedule(snapshot)
    placement = decisions.placement(workload.id)
    assert placement is not None, decisions.pending_reason(workload.id)
    assert len(placement.pods) >= workload.gang_size

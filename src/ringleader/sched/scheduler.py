"""``schedule(snapshot) -> Decisions``: one pure cycle of Run:ai's policy.

Nomenclature:
- *order*: priority (high first), then submit time, then workload id;
- *rule*: what quota a placement must respect: ``deserved`` (in quota),
  ``fair-share`` (over quota, up to the fair share), ``any`` (over the fair
  share, into capacity nobody else could use); limits always hold;
- *miss*: why a workload did not fit in one pool (quota or placement).

A cycle runs four passes over the pending workloads, each in order:
1. in quota: every workload that fits its project's deserved quota, with
   reclaim and priority preemption when the cluster is full; a
   non-preemptible workload stops here (placed, or pending with a reason);
2. over quota up to the fair share, preemptible only, also with reclaim;
3. over the fair share, preemptible only, into what is left, no preemption;
4. extra pods of elastic gangs (past ``min_pods``), one by one.
Node pools are tried in the workload's order, first without preempting
anyone, then with.

Cost: each try that the quotas or the pool's free sums rule out is a few
look-ups; placing a pod looks at about one node (``nodes.NodeOrder``);
trials undo through the journal, and a placement once final is settled (the
journal forgets it).  bench/scheduler.py times a cycle on 1,000 nodes and
10,000 pending workloads; tests/sched/test_reference.py pins the decisions.

Invariants: no I/O, no clock, no randomness; the same snapshot (in any
order) gives the same decisions; a gang is placed whole or not at all;
only whole running preemptible workloads are preempted; no device, node,
project or department limit is passed; non-preemptible work never goes
over deserved quota.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

from ringleader.sched.gangs import Gang, estimate_is_exact, gang_of
from ringleader.sched.model import (
    Decisions,
    Pending,
    Placement,
    PodBinding,
    PodRequest,
    Preemption,
    Snapshot,
    Workload,
)
from ringleader.sched.nodes import NodeState
from ringleader.sched.placement import Grant, Shortfall, place_gang
from ringleader.sched.preemption import Candidate, in_giving_up_order
from ringleader.sched.quota import Amounts, QuotaMiss, fair_shares
from ringleader.sched.reclaim import Reclaiming, Rule
from ringleader.sched.shortage import GangMiss, explain
from ringleader.sched.state import CycleState, grants_amounts

Miss = QuotaMiss | GangMiss
OVER_FAIR_SHARE = QuotaMiss("quota", "over its fair share")
# A placement miss whose reason was not worked out (``_try(explained=False)``).
UNEXPLAINED = GangMiss("")


def schedule(snapshot: Snapshot) -> Decisions:
    """Bindings, preemptions and pending reasons for one cycle."""
    with collector_paused():
        return _Cycle(snapshot).run()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the cycle, back on after.

    Why: a cycle allocates hundreds of thousands of small objects (grants, tuples,
    reasons), so the collector ran its full (generation 2) pass several times per
    cycle, walking the snapshot and the whole server's heap each time: 0.5 s of a
    2 s cycle at 5,000 nodes and 50,000 pending workloads.  The cycle makes no
    reference cycles of its own worth collecting (reference counting frees what it
    drops); whatever garbage exists is collected as usual once it is back on.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def order(workload: Workload) -> tuple[float, float, str]:
    return (-workload.priority, workload.submitted_at, workload.id)


class _Cycle(Reclaiming):
    # Misses answered from memory (``_try``); off only to test that it changes nothing.
    remember_misses = True
    # Reasons of misses that preemption may yet mend worked out only if it does not
    # (``_place_anywhere``); off only to test that it changes nothing.
    explain_late = True

    def __init__(self, snapshot: Snapshot, gangs: dict[str, Gang] | None = None) -> None:
        """``gangs``, when given, are what an earlier cycle worked out for
        workloads that did not change since (``incremental``)."""
        self.state = CycleState(snapshot)
        self.book = self.state.book
        # Bindings by workload, and misses by (workload, pool) with the pools in
        # the order they first missed: tuples and flat dicts rather than a list
        # or dict per workload, so that tens of thousands of pending workloads
        # leave the garbage collector less to walk.
        self.placed: dict[str, tuple[PodBinding, ...]] = {}
        self.placed_pool: dict[str, str] = {}
        self.preemptions: list[Preemption] = []
        self._miss: dict[str, dict[str, Miss]] = {}
        self._gangs: dict[str, Gang] = dict(gangs or {})
        self._gang_misses: dict[str, GangMiss] = {}  # one per reason
        # (workload, pool) -> its gang's estimate
        self._estimates: dict[tuple[str, str], Amounts] = {}
        # Misses by what decides them, with the state they were found in (``_try``).
        self._missed_at: dict[tuple[object, ...], tuple[int, Miss]] = {}
        self.pending = sorted(
            (w for w in self.state.workloads.values() if not w.running), key=order
        )
        self.all_pools = tuple(self.state.all_pools)  # a workload's pools by default
        self.book.fair = fair_shares(self.book, self.state.capacity(), self.state.demand())
        # Who could ever be preempted in each pool: running preemptible workloads
        # of the snapshot (what this cycle places is never a victim); and the
        # same by (pool, project), so that a project's own candidates are found
        # without walking everybody's.
        self.preemptible_in: dict[str, list[Workload]] = {}
        self.preemptible_of: dict[tuple[str, str], list[Workload]] = {}
        self.preemptible_by_project: dict[str, dict[str, list[Workload]]] = {}
        self.giving_up_rank: dict[str, int] = {}
        self._candidate_of: dict[tuple[str, bool], Candidate] = {}
        self._victimless_at: dict[tuple[object, ...], int] = {}
        self._nodes_of: dict[str, tuple[NodeState, ...]] = {}
        running = (w for w in self.state.workloads.values() if w.running and w.is_preemptible)
        for rank, workload in enumerate(in_giving_up_order(running)):
            self.giving_up_rank[workload.id] = rank
            for pool in sorted({g.node.pool for g in self.state.holdings[workload.id]}):
                self.preemptible_in.setdefault(pool, []).append(workload)
                self.preemptible_of.setdefault((pool, workload.project), []).append(workload)
                of_pool = self.preemptible_by_project.setdefault(pool, {})
                of_pool.setdefault(workload.project, []).append(workload)

    def run(self) -> Decisions:
        over_quota = [w for w in self.pending if self._admit_in_quota(w)]
        over_fair_share = [w for w in over_quota if self._admit_up_to_fair_share(w)]
        for workload in over_fair_share:
            self._admit_into_leftovers(workload)
        self._place_extras()
        return Decisions(
            placements=tuple(
                Placement(wid, self.placed_pool[wid], tuple(pods))
                for wid, pods in self.placed.items()
            ),
            preemptions=tuple(self.preemptions),
            pending=tuple(self._pending(w) for w in self.pending if w.id not in self.placed),
        )

    # -- the passes ---------------------------------------------------------

    def _admit_in_quota(self, workload: Workload) -> bool:
        """Pass 1; True when the workload goes on to the over-quota passes."""
        if workload.project not in self.book.projects:
            return False
        if self._place_anywhere(workload, "deserved"):
            return False
        return workload.is_preemptible

    def _admit_up_to_fair_share(self, workload: Workload) -> bool:
        """Pass 2; True when some pool refused it only for its fair share."""
        if self._place_anywhere(workload, "fair-share"):
            return False
        return any(m is OVER_FAIR_SHARE for _, m in self._misses(workload))

    def _admit_into_leftovers(self, workload: Workload) -> None:
        """Pass 3: the pools where only the fair share stood in the way."""
        pools = [p for p, m in self._misses(workload) if m is OVER_FAIR_SHARE]
        for pool in pools:
            if self._place(workload, pool, "any"):
                return

    def _place_extras(self) -> None:
        """Pass 4: pods past the gang minimum, in order, while they fit."""
        holdings = self.state.holdings
        partial = [  # sorted after the filter: tens of thousands hold nothing or all
            w for w in self.state.workloads.values()
            if holdings[w.id] and len(holdings[w.id]) != len(w.pods)
        ]  # fmt: skip
        for workload in sorted(partial, key=order):
            held = holdings[workload.id]
            bound = {g.pod.name for g in held}
            pool = held[0].node.pool
            rule: Rule = "any" if workload.is_preemptible else "deserved"
            for pod in workload.pods:
                if pod.name in bound:
                    continue
                grants = self._try(workload, pool, rule, extra=(pod,), keep=True)
                if isinstance(grants, (QuotaMiss, GangMiss)):
                    break
                self._commit(workload, pool, grants, taken=True)

    # -- one workload -------------------------------------------------------

    def _place_anywhere(self, workload: Workload, rule: Rule) -> bool:
        """Each pool without preempting, then each pool with preemption.

        A preemptible workload over its deserved quota preempts nobody in
        pass 1: it may still run over quota on free capacity in pass 2.

        Where preemption may follow, the tries without it are not explained:
        once the cluster is full, nearly every such workload is then placed by
        preemption, and each placement moves the journal's version on, so each
        reason (a walk over every node of the pool) was worked out for nothing,
        and their number grew with the cluster as each walk did.  Searches that
        find no victims roll back to the very state the tries saw (the same
        version), so the reasons worked out after them are the ones the tries
        would have given.
        """
        pools = workload.node_pools or self.all_pools
        preemptible_in = self.preemptible_in
        may_preempt = any(preemptible_in.get(pool) for pool in pools)
        for pool in pools:
            if self._place(workload, pool, rule, explained=not (may_preempt and self.explain_late)):
                return True
        if not may_preempt:
            return False  # nobody to preempt (what follows would only find that out)
        preempting = pools
        if rule == "deserved" and workload.is_preemptible:
            preempting = tuple(
                p
                for p in pools
                if self.book.in_quota(workload.project, p, self._estimate(workload, p))
            )
        if any(self._place_with_preemption(workload, pool, rule) for pool in preempting):
            return True
        misses = self._miss[workload.id]
        for pool in pools:
            if misses[pool] is UNEXPLAINED:
                explained = self._try(workload, pool, rule)
                if isinstance(explained, list):  # the state its miss was found in, again
                    raise RuntimeError(f"{workload.id} fits in {pool} on a second try")
                misses[pool] = explained
        return False

    def _place(self, workload: Workload, pool: str, rule: Rule, explained: bool = True) -> bool:
        """Place the workload in ``pool`` without preempting, or note why not
        (``UNEXPLAINED``, when not ``explained``, for the caller to work out)."""
        gang = self._gangs.get(workload.id) or self._gang_of(workload)
        known = None
        if self.remember_misses:  # ``_try``'s memory, looked up here first: most tries
            known = self._missed_at.get((gang.shape, workload.project, pool, rule))
        if known is not None and known[0] == self.state.journal.version:
            result: list[Grant] | Miss = known[1]
        else:
            result = self._try(workload, pool, rule, explained=explained, keep=gang.in_order)
        if isinstance(result, list):
            self._commit(workload, pool, result, taken=gang.in_order)
            return True
        misses = self._miss.get(workload.id)
        if misses is None:
            self._miss[workload.id] = {pool: result}
        else:
            misses[pool] = result  # (a pool keeps its place: the order it first missed in)
        return False

    def _try(
        self,
        workload: Workload,
        pool: str,
        rule: Rule,
        extra: tuple[PodRequest, ...] | None = None,
        explained: bool = True,
        keep: bool = False,
    ) -> list[Grant] | Miss:
        """Grants for the workload's gang (or ``extra`` pods) in ``pool`` under
        ``rule``, or the miss.

        ``explained=False`` skips wording a placement miss (trials).  Changes
        nothing, but with ``keep`` (only for pods taken in their own order)
        the grants of a success stay taken, for ``_commit(taken=True)``: a
        trial placement undone and then held again is the same placement.

        A miss is remembered with the journal's version: in the same state, a
        gang of the same requests in the same project, pool and rule misses the
        same way (quota and placement read nothing else), so it is answered
        from memory.  Once the cluster is full, most of a cycle's trials are
        such repeats (thousands of one-GPU notebooks), and a miss changes no
        state, so the version stays until something is placed.
        """
        memo = None
        if extra is None:
            gang = self._gang_of(workload)
            pods, order = gang.pods, gang.order
            if explained and self.remember_misses:
                memo = (gang.shape, workload.project, pool, rule)
                version = self.state.journal.version
                known = self._missed_at.get(memo)
                if known is not None and known[0] == version:
                    return known[1]
            request = self._estimate(workload, pool, gang.pods)
        else:
            pods, order = extra, None
            request = self.state.estimate(pods, pool)
        result = self._trial(workload, pool, rule, pods, order, request, explained, keep)
        if memo is not None and not isinstance(result, list):
            self._missed_at[memo] = (version, result)
        return result

    def _trial(
        self,
        workload: Workload,
        pool: str,
        rule: Rule,
        pods: tuple[PodRequest, ...],
        order: tuple[int, ...] | None,
        request: Amounts,
        explained: bool,
        keep: bool,
    ) -> list[Grant] | Miss:
        """``_try``'s work: the quota checks and the placement itself."""
        miss = self._quota_miss(workload, pool, request, rule)
        if miss:
            return miss
        mark = self.state.mark()
        result = place_gang(self.state.cluster, pool, pods, order)
        if isinstance(result, Shortfall):
            if not explained:
                self.state.rollback(mark)
                return UNEXPLAINED
            reason = explain(self.state.cluster, pool, pods, result)
            self.state.rollback(mark)
            gang_miss = self._gang_misses.get(reason)
            if gang_miss is None:  # thousands of workloads wait for the same reasons
                gang_miss = self._gang_misses[reason] = GangMiss(reason)
            return gang_miss
        # The quota check reads the book only, which placing does not touch; where
        # the grants sum to the estimate itself, it is the check that just passed.
        miss = None
        if not estimate_is_exact(pods):
            miss = self._quota_miss(workload, pool, grants_amounts(result), rule)
        if miss or not keep:
            self.state.rollback(mark)
        return miss or result

    def _quota_miss(
        self, workload: Workload, pool: str, request: Amounts, rule: Rule
    ) -> QuotaMiss | None:
        project = workload.project
        miss = self.book.limit_miss(project, pool, request)
        if miss or rule == "any":
            return miss
        if rule == "deserved":
            return self.book.deserved_miss(project, pool, request)
        if rule == "fair-share" and not self.book.within_fair_share(project, pool, request):
            return OVER_FAIR_SHARE
        return None

    def _commit(
        self, workload: Workload, pool: str, grants: list[Grant], taken: bool = False
    ) -> None:
        """Hold ``grants`` (already taken in the cluster when ``taken``)."""
        self.state.hold(workload, grants, taken)
        shares = self.state.cluster.shares
        bindings = tuple(g.binding(shares) for g in grants)
        self.placed[workload.id] = self.placed.get(workload.id, ()) + bindings
        self.placed_pool[workload.id] = pool
        self.state.settle()  # called with no trial open: nothing will undo this

    def _misses(self, workload: Workload) -> list[tuple[str, Miss]]:
        """(pool, why it missed there) for each pool the workload missed in."""
        return list(self._miss[workload.id].items())

    def _gang(self, workload: Workload) -> tuple[PodRequest, ...]:
        return self._gang_of(workload).pods

    def _gang_of(self, workload: Workload) -> Gang:
        gang = self._gangs.get(workload.id)
        if gang is None:
            gang = self._gangs[workload.id] = gang_of(workload)
        return gang

    def _estimate(
        self, workload: Workload, pool: str, gang: tuple[PodRequest, ...] | None = None
    ) -> Amounts:
        """``state.estimate`` of the workload's gang (``gang`` when the caller
        has it at hand) in ``pool``, worked out once."""
        key = (workload.id, pool)
        estimate = self._estimates.get(key)
        if estimate is None:
            pods = self._gang(workload) if gang is None else gang
            estimate = self._estimates[key] = self.state.estimate(pods, pool)
        return estimate

    # -- pending reasons -----------------------------------------------------

    def _pending(self, workload: Workload) -> Pending:
        if workload.project not in self.book.projects:
            return Pending(
                workload.id, f"project {workload.project} does not exist", "unknown-project"
            )
        misses = self._misses(workload)
        first = misses[0][1]
        cause = first.cause if isinstance(first, QuotaMiss) else "capacity"
        if len(misses) == 1:
            return Pending(workload.id, first.reason, cause)
        reason = "; ".join(f"pool {pool}: {miss.reason}" for pool, miss in misses)
        return Pending(workload.id, reason, cause)

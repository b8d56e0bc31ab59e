"""Placing a workload by preempting others: the cycle's reclaim and priority
preemption, as a part of ``scheduler._Cycle`` kept in its own module.

Which victims is ``preemption.choose_victims``'s; what is here is when the
cycle may preempt at all (reclaim: within its deserved quota or fair share;
priority: a lower priority of its own project), which running workloads are
candidates, and the reason each victim is told.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from ringleader.sched import preemption
from ringleader.sched.deferral import DeferredReleases
from ringleader.sched.model import RESOURCES, Preemption, Workload
from ringleader.sched.preemption import Candidate, choose_victims
from ringleader.sched.probe import FitProbe
from ringleader.sched.quota import EPS, Amounts
from ringleader.sched.text import UNITS, amount

if TYPE_CHECKING:
    from ringleader.sched.nodes import NodeState
    from ringleader.sched.quota import QuotaBook
    from ringleader.sched.state import CycleState


# What quota a placement must respect (``scheduler``'s nomenclature).
Rule = Literal["deserved", "fair-share", "any"]


class Reclaiming:
    """The preemption half of a cycle (mixed into ``scheduler._Cycle``, whose
    state, quota book and trials it uses)."""

    state: CycleState
    book: QuotaBook
    preemptions: list[Preemption]
    preemptible_in: dict[str, list[Workload]]
    preemptible_of: dict[tuple[str, str], list[Workload]]
    preemptible_by_project: dict[str, dict[str, list[Workload]]]
    giving_up_rank: dict[str, int]
    _candidate_of: dict[tuple[str, bool], Candidate]
    _nodes_of: dict[str, tuple[NodeState, ...]]
    # Searches that found no victims: (gang shape, project, priority, pool, rule) -> the
    # journal's version they ran in; consulted only with ``remember_misses``.
    _victimless_at: dict[tuple[object, ...], int]
    remember_misses: bool
    # The faster paths of choosing victims (off only to test that they change nothing).
    fast_victims = True
    defer_victims = True  # with fast_victims: ``sched.deferral`` (off to measure it)
    _estimate: Callable[..., Any]
    _try: Callable[..., Any]
    _gang_of: Callable[..., Any]
    _commit: Callable[..., Any]

    def _place_with_preemption(self, workload: Workload, pool: str, rule: Rule) -> bool:
        if not self.preemptible_in.get(pool):
            return False
        request = self._estimate(workload, pool)
        may_reclaim = rule == "deserved" and self.book.in_quota(workload.project, pool, request)
        may_reclaim |= rule == "fair-share" and self.book.within_fair_share(
            workload.project, pool, request
        )
        own = self.preemptible_of.get((pool, workload.project))
        if not may_reclaim and not (own and own[0].priority < workload.priority):
            return False  # no candidate at all: choose_victims would find none
        # A search that found no victims walked every candidate: in the same state, a
        # gang of the same shape, project and priority finds none again (the same
        # candidates, eligibility and trials), so it is answered from memory. Queues of
        # alike workloads that no reclaim can place asked it again and again.
        memo = (self._gang_of(workload).shape, workload.project, workload.priority, pool, rule)
        version = self.state.journal.version
        if self.remember_misses and self._victimless_at.get(memo) == version:
            return False

        def eligible(candidate: Candidate) -> bool:
            if not candidate.reclaim:
                return True
            return self.book.above_fair_share(candidate.workload.project, pool, request)

        candidates = self._candidates(workload, pool, may_reclaim, request)
        if self.fast_victims:
            probe = FitProbe(self, workload, pool, rule)  # type: ignore[arg-type]
            victims = choose_victims(
                self.state,
                candidates,
                eligible,
                probe.fits,
                probe.still_misses,
                probe.surely_fits,
                DeferredReleases(self.state, probe) if self.defer_victims else None,
            )
        else:

            def fits() -> bool:
                return isinstance(self._try(workload, pool, rule, explained=False), list)

            victims = choose_victims(self.state, candidates, eligible, fits)
        if victims is None:
            self._victimless_at[memo] = version  # the trials were all rolled back
            return False
        for victim in victims:
            self.preemptions.append(
                Preemption(victim.workload.id, self._why(victim, workload, pool), workload.id)
            )
            self.state.release(victim.workload)
        in_order = self._gang_of(workload).in_order
        grants = self._try(workload, pool, rule, keep=in_order)
        if not isinstance(grants, list):  # choose_victims checked this very trial
            raise RuntimeError(f"preemption for {workload.id} made no room: {grants.reason}")
        self._commit(workload, pool, grants, taken=in_order)
        return True

    def _candidates(
        self, workload: Workload, pool: str, may_reclaim: bool, request: Amounts
    ) -> Iterator[Candidate]:
        """Other projects' work first (reclaim), then the project's own lower
        priorities; each in giving-up order, skipping the already preempted.

        Reclaim candidates come from a merge of each project's own list (in the
        same order), and a project whose usage is no longer above its fair share
        drops out of the merge at once: while victims are chosen, usage only falls
        (a trial that places the workload is undone before the next candidate is
        drawn), so ``eligible`` would refuse every later candidate of it anyway.
        Without this, a cluster whose over-quota projects are back at their fair
        share walked every running workload once per pending one.
        """
        holdings = self.state.holdings
        if may_reclaim:
            if self.fast_victims:
                yield from self._reclaim_candidates(workload, pool, request)
            else:
                for other in self.preemptible_in.get(pool, ()):
                    if other.project != workload.project and holdings[other.id]:
                        yield self._candidate(other, True)
        # The project's own, in the same order: lowest priority first, so the
        # lower priorities are a prefix.
        for other in self.preemptible_of.get((pool, workload.project), ()):
            if other.priority >= workload.priority:
                break
            if holdings[other.id]:
                yield self._candidate(other, False)

    def _reclaim_candidates(
        self, workload: Workload, pool: str, request: Amounts
    ) -> Iterator[Candidate]:
        """Other projects' running preemptible work in giving-up order (``_candidates``)."""
        holdings, book, rank = self.state.holdings, self.book, self.giving_up_rank
        heads: list[tuple[int, int, list[Workload]]] = []
        for project, victims in self.preemptible_by_project.get(pool, {}).items():
            if project != workload.project:
                heads.append((rank[victims[0].id], 0, victims))
        heapq.heapify(heads)
        drawn, alone = 0, preemption.SINGLE_TRIALS  # choose_victims tries each of those alone
        while heads:
            _, at, victims = heads[0]
            other = victims[at]
            if drawn >= alone and not book.above_fair_share(other.project, pool, request):
                heapq.heappop(heads)  # this project is done: it only falls further
                continue
            if at + 1 < len(victims):
                heapq.heapreplace(heads, (rank[victims[at + 1].id], at + 1, victims))
            else:
                heapq.heappop(heads)
            if holdings[other.id]:
                drawn += 1
                yield self._candidate(other, True)

    def _candidate(self, other: Workload, reclaim: bool) -> Candidate:
        key = (other.id, reclaim)
        found = self._candidate_of.get(key)
        if found is None:
            found = self._candidate_of[key] = Candidate(other, reclaim)
            if other.id not in self._nodes_of:  # what it holds now, before any release
                held = {id(g.node): g.node for g in self.state.holdings[other.id]}
                self._nodes_of[other.id] = tuple(held.values())
        return found

    def nodes_held(self, workload: Workload) -> tuple[NodeState, ...]:
        """The nodes a candidate held when it was first drawn (a running
        workload's grants change only when it is released, until pass 4)."""
        return self._nodes_of[workload.id]

    def _why(self, victim: Candidate, workload: Workload, pool: str) -> str:
        other = victim.workload
        if not victim.reclaim:
            return (
                f"preempted by {workload.id} of the same project {workload.project}, "
                f"a higher priority ({workload.priority} > {other.priority})"
            )
        used = self.book.used(other.project, pool)
        fair = self.book.fair_share(other.project, pool)
        i = next((i for i in range(3) if used[i] > fair[i] + EPS), 0)
        resource = RESOURCES[i]
        return (
            f"reclaimed for {workload.id} of project {workload.project}: project {other.project} "
            f"uses {amount(resource, used[i])} {UNITS[resource]} in pool {pool}, above its fair "
            f"share of {amount(resource, fair[i])}"
        )

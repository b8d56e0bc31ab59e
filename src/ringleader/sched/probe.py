"""``fits()`` for choosing victims, and when a release cannot change its answer.

Choosing victims (``preemption.choose_victims``) releases candidates one by
one and asks after each whether the workload fits now: on a full cluster of
small workloads that is hundreds of trials per reclaiming workload, nearly
all of them misses.  A miss has a cause, and most causes survive a release:

- *quota*: the workload's own project (or department) is out of room; a
  release of another project's workload, outside its department, changes
  neither usage, so the same check misses again;
- *nodes*: the first pod of the gang (placed first, on the cluster as it
  stands) found no node at all; a release changes only the nodes the victim
  held, so if none of those can hold the pod now, nothing can: the other
  nodes are as they were, and (``PlacementPolicy.per_node_candidates``)
  whether the policy offers a node depends on that node alone.  The quota
  checks that passed before it pass again: a release only lowers usage.
  For a gang of alike pods (one device each if a fraction) any shortfall,
  or the pool's sums below the gang, is this kind too: it fits where the
  nodes hold that many pods in all, each as many as it holds alone, and a
  release on nodes that cannot hold one pod adds to no node's count.

``FitProbe.still_misses`` says True only in those two cases; every other
answer comes from a real trial, so the victims chosen are the ones the
plain loop would choose (tests/sched/test_incremental.py compares both).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from ringleader.sched.model import PodRequest, Workload
from ringleader.sched.nodes import NodeState
from ringleader.sched.placement import Shortfall, best_grant, holds, place_gang, pool_lacks
from ringleader.sched.preemption import Candidate
from ringleader.sched.quota import ZERO, Amounts
from ringleader.sched.shortage import request_signature
from ringleader.sched.state import grant_amounts, grants_amounts

if TYPE_CHECKING:
    from ringleader.sched.reclaim import Rule
    from ringleader.sched.scheduler import _Cycle


class FitProbe:
    """One workload's trials in one pool while its victims are chosen."""

    def __init__(self, cycle: _Cycle, workload: Workload, pool: str, rule: Rule) -> None:
        self.cycle, self.workload, self.pool, self.rule = cycle, workload, pool, rule
        gang = cycle._gang_of(workload)
        self.pods, self.order = gang.pods, gang.order
        self.first: PodRequest = gang.pods[gang.order[0]]
        self.request = cycle._estimate(workload, pool, gang.pods)
        state = cycle.state
        self.policy = state.cluster.policy
        self.sure = self.policy.per_node_candidates
        self.department = cycle.book.projects[workload.project].department
        # Why the last trial missed, while that still holds; None: not known.
        self.kind: Literal["quota", "nodes"] | None = None
        # The nodes the last passing trial put the gang on, and its amounts; used
        # only for gangs of one request whose figures do not depend on the node
        # (no GPU-memory fraction): see ``surely_fits``.
        self.witness: tuple[NodeState, ...] = ()
        self.placed: Amounts = ZERO
        self.uniform = len(set(map(request_signature, self.pods))) == 1  # one shape of pod
        self.same_everywhere = self.uniform and self.first.gpu_memory_bytes is None
        # A gang of alike pods, each on one device if a fraction: it fits where the
        # nodes can hold that many pods in all, each node as many as it can alone
        # (``fits`` places them one by one on the best node that holds one), so a
        # release on nodes that cannot hold one does not change whether it fits.
        self.alike = self.uniform and (not self.first.fractional or self.first.gpu_devices == 1)

    def fits(self) -> bool:
        """``_try(workload, pool, rule, explained=False)`` is a list of grants: the
        same checks in the same order, also noting why a miss missed."""
        cycle, workload, pool, rule = self.cycle, self.workload, self.pool, self.rule
        self.kind = None
        if cycle._quota_miss(workload, pool, self.request, rule):
            self.kind = "quota"
            return False
        state = cycle.state
        cluster = state.cluster
        if len(self.pods) == 1:  # most workloads: the trial without taking the grant
            largest = cluster.max_device_memory(pool)
            if not cluster.ready(pool) or pool_lacks(cluster.pool_free[pool], self.pods, largest):
                # The pool's free sums are below the one pod, and no node has more
                # free than the pool: no node holds it, as when best_grant finds none.
                self.kind = "nodes"
                return False
            grant = best_grant(cluster.orders[pool], self.first, largest)
            if grant is None:
                self.kind = "nodes"
                return False
            amounts = grant_amounts(grant)
            if cycle._quota_miss(workload, pool, amounts, rule):
                return False
            self.witness, self.placed = (grant.node,), amounts
            return True
        mark = state.mark()
        result = place_gang(cluster, pool, self.pods, self.order)
        state.rollback(mark)
        if isinstance(result, Shortfall):
            if self.alike or (result.pod is self.first and result.placed == 0):
                self.kind = "nodes"
            return False
        amounts = grants_amounts(result)
        if cycle._quota_miss(workload, pool, amounts, rule):
            return False
        self.witness, self.placed = tuple({id(g.node): g.node for g in result}.values()), amounts
        return True

    def _independent(self, other: Workload) -> bool:
        """Releasing ``other`` leaves this workload's project and department usage."""
        if other.project == self.workload.project:
            return False
        owner = self.cycle.book.projects.get(other.project)
        return owner is None or owner.department is None or owner.department != self.department

    def surely_fits(self, without: Candidate) -> bool:
        """True when the trial of the victims chosen so far, less ``without``,
        surely passes (``preemption._fewest``; the prefix before it is released).

        The last passing trial released every victim chosen so far and put the gang
        on the ``witness`` nodes.  If ``without`` held nothing on them, each of them
        sees the very same releases in the same order, so it holds the same pods
        again, and the policy offers it again (per-node candidates).  A gang of one
        request placed pod by pod on the best node that holds one fits whenever the
        nodes can hold that many in all, whatever node each pod ends on; with no
        GPU-memory share, its figures are the same on any node, so the quota checks
        read the same amounts.  Usage and the pool's free sums only move the
        trial's way as the rest of the victims are released, so checks that pass
        now pass in the trial.
        """
        witness = self.witness
        if not witness or not self.sure or not self.same_everywhere:
            return False
        held = self.cycle.nodes_held(without.workload)
        if any(node in held for node in witness):
            return False
        cycle, workload, pool, rule = self.cycle, self.workload, self.pool, self.rule
        if cycle._quota_miss(workload, pool, self.request, rule):
            return False
        if cycle._quota_miss(workload, pool, self.placed, rule):
            return False
        cluster = cycle.state.cluster
        largest = cluster.max_device_memory(pool)
        return not pool_lacks(cluster.pool_free[pool], self.pods, largest)

    def still_misses(self, released: Candidate) -> bool:
        """True when ``fits()`` surely misses again after ``released`` was
        released on top of the state of its last (missed) trial."""
        kind = self.kind
        if kind is None or not self.sure:
            return False
        other = released.workload
        if kind == "quota":  # unless the release gave the project (or department) room
            return self._independent(other)
        # "nodes": the quota checks passed, and a release only lowers usage, so they
        # pass again; the nodes it freed decide.
        pool, pod, policy = self.pool, self.first, self.policy
        for node in self.cycle.nodes_held(other):
            if node.ready and node.pool == pool and holds(node, pod, policy):
                self.kind = None
                return False
        return True

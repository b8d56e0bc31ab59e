"""Reclaim's victims whose nodes cannot matter: their quota given back, their
nodes left as they are until another victim shares one.

Choosing victims (``preemption.choose_victims``) releases candidates in
giving-up order until the workload fits.  On a full cluster, a gang whose
first pod found no node at all (``FitProbe.kind == "nodes"``) is placed only
where a release makes a node able to hold that pod; the hundreds of
candidates released before one does were each given back whole (their
nodes' rows, the pool's sums, the node order) and taken back again by the
rollback, and ``_fewest`` then released and dropped each of them once more.

A candidate is *deferred* when its release provably changes no trial:
- its project and department are not the workload's (``FitProbe._independent``):
  the workload's own quota checks read the same usage; or they are, but those
  checks passed before any release and the gang's amounts are the same on any
  node, so every trial passes them, with or without it;
- every pod of the gang asks the same (``FitProbe.uniform``), so a node that
  cannot hold the first pod holds none of them;
- none of its nodes could hold that pod even with it and the victims deferred
  before it on that node released (a ``NodeView`` of the rows they would leave).
Its quota is given back at once (eligibility of the later candidates of its
project reads it, ``CycleState.release_books``); its nodes are given back
(``give_back``) only before a victim released whole shares one of them, so
each node's rows see the very releases in the very order they always did (the
pool's free sums add them in another order: they only rule gangs out early,
and a node that holds the pod counts in them either way).

A node no trial can place a pod on changes no trial's answer: ``fits()``
places the gang only on nodes that hold its pod, and the pool's free sums it
checks first pass whenever such nodes exist.  So a victim still deferred when
the workload fits is one ``_fewest`` would drop (without it every trial
answers the same): ``choose_victims`` leaves it out, and works out the fewest
of the others from the state as it was.  tests/sched/test_incremental.py
compares the victims with the plain loop's on random clusters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ringleader.sched.nodes import WHOLE
from ringleader.sched.placement import NodeView, holds

if TYPE_CHECKING:
    from ringleader.sched.model import Workload
    from ringleader.sched.preemption import Candidate
    from ringleader.sched.probe import FitProbe
    from ringleader.sched.state import CycleState


class DeferredReleases:
    """One search's deferred victims.  Its own lists are not journaled: the search
    rolls back only at its end (``choose_victims``), after which they are dropped;
    the releases it makes are, as every release is."""

    def __init__(self, state: CycleState, probe: FitProbe) -> None:
        self.state, self.probe = state, probe
        # id(node) -> the deferred victims holding it, in the order they were drawn.
        self.on_node: dict[int, tuple[Workload, ...]] = {}
        # Workload id -> deferred, not given back; in the order they were drawn.
        self.pending: dict[str, Workload] = {}
        self.used = False  # a victim was deferred in this search (marks no longer line up)
        # The workload's quota checks pass before any release (then in every trial:
        # releases only lower usage), and read the same amounts wherever it lands.
        cycle = probe.cycle
        self.quota_sure = probe.same_everywhere and (
            cycle._quota_miss(probe.workload, probe.pool, probe.request, probe.rule) is None
        )

    def defer(self, candidate: Candidate) -> bool:
        """Give back ``candidate``'s quota only, where its nodes cannot matter
        (see the module's docstring); False: release it whole instead."""
        probe = self.probe
        if probe.kind != "nodes" or not probe.uniform or not probe.sure:
            return False
        other = candidate.workload
        if not self.quota_sure and not probe._independent(other):
            return False
        nodes = probe.cycle.nodes_held(other)
        on_node, holdings = self.on_node, self.state.holdings
        pod, policy, pool = probe.first, probe.policy, probe.pool
        whole, wanted = not pod.fractional, pod.gpu_devices
        for node in nodes:
            if node.ready and node.pool == pool:
                # The node's rows after the deferred victims on it and this one, in
                # the order they were drawn: the releases ``give_back`` would make.
                before = on_node.get(id(node), ())
                grants = [g for w in (*before, other) for g in holdings[w.id] if g.node is node]
                if whole and node.free[WHOLE] + sum(len(g.devices) for g in grants) < wanted:
                    continue  # too few devices even if all of them came free
                if holds(NodeView(node, grants), pod, policy):
                    return False
        self.state.release_books(other)
        for node in nodes:
            on_node[id(node)] = (*on_node.get(id(node), ()), other)
        self.pending[other.id] = other
        self.used = True
        return True

    def give_back(self, candidate: Candidate) -> None:
        """Before ``candidate`` is released whole: give back the nodes of every
        deferred victim on its nodes, in the order they were drawn."""
        on_node = self.on_node
        if not on_node:
            return
        waiting = {
            w.id for node in self.probe.cycle.nodes_held(candidate.workload)
            for w in on_node.get(id(node), ())
        }  # fmt: skip
        if waiting:  # in drawing order: ``pending`` keeps it
            for workload in [w for w in self.pending.values() if w.id in waiting]:
                self._give_back(workload)

    def _give_back(self, workload: Workload) -> None:
        self.state.release_nodes(workload)
        on_node = self.on_node
        for node in self.probe.cycle.nodes_held(workload):
            left = tuple(w for w in on_node[id(node)] if w is not workload)
            if left:
                on_node[id(node)] = left
            else:
                del on_node[id(node)]
        del self.pending[workload.id]

    def is_pending(self, candidate: Candidate) -> bool:
        return candidate.workload.id in self.pending

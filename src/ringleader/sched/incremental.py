"""Cycles that work out again only what changed since the last one.

A server runs a cycle every time workloads come, go or change phase, and
most of each snapshot is the last one's: the same nodes, and the same
workloads, most of them still pending.  ``IncrementalScheduler.schedule``
gives exactly the decisions ``schedule`` would (a property test replays
random sequences of changes through both), while reusing:

- the whole last answer when the snapshot is unchanged (equal, as frozen
  data: nodes, projects, departments, workloads, strategy);
- per workload that is unchanged (equal to its last version, or the very
  same object): its gang, its fill order and its gang signature;
- per (workload, pool), with the same pools' largest devices as last time:
  its gang's quota estimate.

What is not reused, and why: the passes themselves.  Each decision reads the
state every earlier one left (who was placed, where, and what that did to
quotas, fair shares and the nodes' order), so one changed workload can move
every later decision; a replay that skipped any of them could not be the
same as a full cycle.  Fair shares, likewise, read the whole demand.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringleader.sched.gangs import Gang
from ringleader.sched.model import Decisions, Snapshot, Workload
from ringleader.sched.quota import Amounts
from ringleader.sched.scheduler import _Cycle, collector_paused


@dataclass
class _Last:
    snapshot: Snapshot
    workloads: dict[str, Workload]
    gangs: dict[str, Gang]
    estimates: dict[tuple[str, str], Amounts]
    device_memory: dict[str, int]
    decisions: Decisions


class IncrementalScheduler:
    """``schedule`` for a caller that runs cycle after cycle (the server's
    placing loop): the same decisions, less work where little changed."""

    def __init__(self) -> None:
        self._last: _Last | None = None
        # What the last call reused, for tests and the benchmark to read.
        self.reused: dict[str, int] = {}

    def schedule(self, snapshot: Snapshot) -> Decisions:
        """Bindings, preemptions and pending reasons for one cycle."""
        last = self._last
        if last is not None and (snapshot is last.snapshot or snapshot == last.snapshot):
            self.reused = {"decisions": 1}
            return last.decisions
        gangs: dict[str, Gang] = {}
        kept: set[str] = set()
        if last is not None:
            for workload in snapshot.workloads:
                before = last.workloads.get(workload.id)
                if before is not None and (before is workload or before == workload):
                    kept.add(workload.id)
                    gang = last.gangs.get(workload.id)
                    if gang is not None:
                        gangs[workload.id] = gang
        with collector_paused():
            cycle = _Cycle(snapshot, gangs)
            device_memory = dict(cycle.state.device_memory)
            estimates: dict[tuple[str, str], Amounts] = {}
            if last is not None:
                same = {p for p, m in device_memory.items() if last.device_memory.get(p) == m}
                estimates = {
                    key: value
                    for key, value in last.estimates.items()
                    if key[0] in kept and key[1] in same
                }
            cycle._estimates.update(estimates)
            decisions = cycle.run()
        self.reused = {"gangs": len(gangs), "estimates": len(estimates), "workloads": len(kept)}
        self._last = _Last(
            snapshot,
            {w.id: w for w in snapshot.workloads},
            cycle._gangs,
            cycle._estimates,
            device_memory,
            decisions,
        )
        return decisions

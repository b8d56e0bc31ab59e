"""One cycle's mutable state: the cluster, the quota book and who holds what.

Nomenclature:
- *holding*: the grants a workload holds: its running bindings from the
  snapshot, plus what this cycle places.
- *gang*: the first ``gang_size`` pods of a workload, placed together;
  pods past it are *extras*, placed one by one when they fit.
- *estimate*: a request's amounts before placement; a GPU-memory fraction
  counts as its share of the pool's largest device (the least it can be),
  and the exact share is checked again once the device is known.

Invariants: ``hold`` and ``release`` are the only ways usage changes, and
both go through the journal, so ``mark``/``rollback`` undo trials exactly;
``settle`` forgets what can no longer be undone, only when no trial is open.
Running workloads are taken in workload-id order so float sums do not
depend on the order of the snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence

from ringleader.sched.journal import Journal
from ringleader.sched.model import DEFAULT_POOL, RESOURCES, PodRequest, Snapshot, Workload
from ringleader.sched.placement import Cluster, Grant
from ringleader.sched.quota import ZERO, Amounts, QuotaBook, add


class CycleState:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.journal = Journal()
        self.cluster = Cluster(snapshot.nodes, snapshot.strategy, self.journal)
        self.book = QuotaBook(snapshot.projects, snapshot.departments, self.journal)
        self.workloads = {w.id: w for w in sorted(snapshot.workloads, key=lambda w: w.id)}
        self.holdings: dict[str, tuple[Grant, ...]] = dict.fromkeys(self.workloads, ())
        pools = sorted(self.cluster.pools, key=lambda p: (p != DEFAULT_POOL, p))
        self.all_pools = pools or [DEFAULT_POOL]  # no nodes: still a pool to explain
        # The largest device of each pool (estimates count a memory share of it).
        self.device_memory = {p: self.cluster.max_device_memory(p) for p in self.cluster.pools}
        for workload in self.workloads.values():
            if workload.running:
                pods = {p.name: p for p in workload.pods}
                self.hold(
                    workload, [self.cluster.grant_of(b, pods[b.pod]) for b in workload.bindings]
                )
        self.settle()

    def pools_for(self, workload: Workload) -> tuple[str, ...]:
        return workload.node_pools or tuple(self.all_pools)

    def mark(self) -> int:
        return self.journal.mark()

    def settle(self) -> None:
        """What is held now is final: the journal forgets how it got here
        (``Journal.forget``; only between trials, with no mark held)."""
        self.journal.forget()

    def rollback(self, mark: int) -> None:
        self.journal.rollback(mark)

    def hold(self, workload: Workload, grants: Sequence[Grant], taken: bool = False) -> None:
        """Give ``grants`` to the workload; ``taken``: they are already taken in
        the cluster (a trial kept as it was), so only the books change."""
        for grant in grants:
            if not taken:
                self.cluster.take(grant)
            self.book.change(workload.project, grant.node.pool, grant_amounts(grant), +1)
        self.journal.set(self.holdings, workload.id, self.holdings[workload.id] + tuple(grants))

    def release(self, workload: Workload) -> None:
        self.release_books(workload)
        self.release_nodes(workload)

    def release_books(self, workload: Workload) -> None:
        """The quota book's half of ``release``; ``release_nodes`` is the other
        (``sched.deferral`` gives a victim's nodes back only when they matter)."""
        for grant in self.holdings[workload.id]:
            self.book.change(workload.project, grant.node.pool, grant_amounts(grant), -1)

    def release_nodes(self, workload: Workload) -> None:
        """The nodes' half of ``release``, after ``release_books``."""
        for grant in self.holdings[workload.id]:
            self.cluster.release(grant)
        self.journal.set(self.holdings, workload.id, ())

    def held_in(self, workload: Workload, pool: str) -> Amounts:
        total = ZERO
        for grant in self.holdings[workload.id]:
            if grant.node.pool == pool:
                total = add(total, grant_amounts(grant))
        return total

    def estimate(self, pods: Sequence[PodRequest], pool: str) -> Amounts:
        # Three running sums rather than a tuple per pod (``add``): the same additions
        # in the same order, so the same floats, at a third of the cost (it runs for
        # every pending workload's gang, up to 64 pods each).
        gpus, cores, memory = ZERO
        largest = self.device_memory.get(pool, 0)
        for pod in pods:
            if pod.gpu_portion is not None:
                share = pod.gpu_portion
            elif pod.gpu_memory_bytes is not None and largest:
                share = min(1.0, pod.gpu_memory_bytes / largest)
            else:
                share = 1.0
            gpus += pod.gpu_devices * share
            cores += pod.cpu_cores
            memory += float(pod.memory_bytes)
        return (gpus, cores, memory)

    def capacity(self) -> dict[str, Amounts]:
        """What each pool's ready nodes have in all: devices, cores, bytes."""
        capacity = {}
        for pool in self.all_pools:
            nodes = self.cluster.ready(pool)
            capacity[pool] = (
                float(sum(len(n.gpus) for n in nodes)),
                sum(n.capacity[0] for n in nodes),
                sum(n.capacity[1] for n in nodes),
            )
        return capacity

    def demand(self) -> dict[tuple[str, str], Amounts]:
        """Usage plus pending requests per (project, pool), the fair share's
        input; a non-preemptible request counts only up to deserved quota."""
        running: dict[tuple[str, str], Amounts] = {}
        flexible: dict[tuple[str, str], Amounts] = {}
        firm: dict[tuple[str, str], Amounts] = {}
        for workload in self.workloads.values():
            if workload.project not in self.book.projects:
                continue
            if workload.running:
                for pool in sorted({g.node.pool for g in self.holdings[workload.id]}):
                    key = (workload.project, pool)
                    running[key] = add(running.get(key, ZERO), self.held_in(workload, pool))
                continue
            into = flexible if workload.is_preemptible else firm
            for pool in self.pools_for(workload):
                key = (workload.project, pool)
                into[key] = add(into.get(key, ZERO), self.estimate(workload.pods, pool))
        demand = {}
        for key in sorted({*running, *flexible, *firm}):
            used, asked = running.get(key, ZERO), firm.get(key, ZERO)
            room = [
                max(0.0, self.book.deserved(*key, r) - used[i]) for i, r in enumerate(RESOURCES)
            ]
            capped = (min(asked[0], room[0]), min(asked[1], room[1]), min(asked[2], room[2]))
            demand[key] = add(add(used, flexible.get(key, ZERO)), capped)
        return demand


def grant_amounts(grant: Grant) -> Amounts:
    return (grant.gpus, grant.pod.cpu_cores, float(grant.pod.memory_bytes))


def grants_amounts(grants: Sequence[Grant]) -> Amounts:
    total = ZERO
    for grant in grants:
        total = add(total, grant_amounts(grant))
    return total

"""Scheduler benchmark: one ``schedule(snapshot)`` cycle on a large simulated cluster.

What is timed is the pure function ``ringleader.sched.schedule`` alone, in this
process: the snapshot is built beforehand (not timed) and the decisions are
only counted afterwards. Nothing here talks to a server, a database or a node.

Snapshots (all from one seeded ``random.Random``, so every run of this script
sees the same ones):

- base: 1,000 ready nodes of 8 GPUs (80 GiB each), 128 cores and 2 TiB of
  memory, in one pool; 20 projects in 4 departments whose deserved GPU quotas
  add up to the cluster's GPUs (drawn shares, over-quota weights 1 to 3, a
  few GPU limits); 10,000 pending workloads on an empty cluster. Pods per
  workload are skewed small (most have 1, a few 32 or 64, see KINDS): notebooks
  with a portion or a GPU-memory fraction of one device, inference replicas on
  fractions, single-pod training on 1 to 8 whole GPUs, distributed training of
  2 to 64 pods of 1 to 8 whole GPUs, some elastic (``min_pods``). Priorities
  and preemptibility follow the kind (train 50 preemptible, build 100 and
  inference 125 not, some build-preemptible 75). Demand is many times the
  cluster, as in a busy queue, so the cycle both fills the cluster and says
  why the rest waits.
- reclaim: the same cluster full of running workloads (whole nodes of 8-GPU
  gangs, nodes of 1- and 2-GPU pods, nodes of half-GPU pods). Ten projects
  hold more than their deserved quota (all preemptible); the other ten hold
  less, and submit in-quota work asking for 5% of the cluster's GPUs, which
  the cycle can place only by reclaiming; the over-quota projects also have a
  backlog of pending training (priority 50, like their running work, so it
  preempts nobody) that stays pending. Preemptions are counted.
- scaling (``--factors``, 2 and 4 by default): the base cycle again with 2x
  and 4x the nodes (quotas scaled, the same pending workloads) and with 2x and
  4x the pending workloads (the same nodes), and the reclaim cycle on a 2x and
  4x cluster (nodes and backlog), each with its ratio to its 1x time; the
  growth lines print 1x, 2x, 4x per dimension.
- incremental: ``IncrementalScheduler`` over the base snapshot again
  (unchanged) and with one more pending workload, against a full cycle.

Method: each cycle is run once untimed (warm-up), then ``--runs`` times timed
with ``time.perf_counter`` (wall) and ``time.process_time`` (this process's
CPU), after a ``gc.collect()`` (``schedule`` itself pauses the collector for
the cycle, as it does in a server); the median, min and max are reported. Every run must
give decisions equal to the first (the scheduler is deterministic; compared
by a digest, so no earlier run's decisions are alive during a run). Pods
placed per second = pods bound by the cycle / the cycle's median wall time.

The machine is shared (2 cores; others run test suites on it): before each
timed run the script waits for idle CPUs (from a budget for the whole run,
``--wait-budget``), and measures again (``--tries`` in all) when other
processes used more than 0.25 cores meanwhile (from /proc/stat: all CPUs'
busy time less this process's); what other work used during each kept run
is recorded, and a fixed pure-Python loop is timed before each run, since
this VM's CPU speed itself varies. A per-phase split (setup and fair
shares, the four passes, the garbage collector's share) comes from one
further base run with the cycle's pass methods wrapped in timers
(``_Cycle`` is private: the split is approximate and left out of the totals).

Peer anchor: kube-scheduler's published integration benchmark
(``scheduler_perf``), about 800 pods/s; it needs a Kubernetes tree, etcd and
Go and cannot run here, so the ratio compares our figure with that published
one, not a run on this machine (and kube-scheduler's pods go one at a time
through filter/score plugins and an API bind, ours through one pure function).

Writes bench/results/scheduler.json and bench/results/scheduler.md
(not with --quick, a small smoke run that only prints).

Usage: python bench/scheduler.py [--runs 5] [--scaling-runs 3] [--wait-budget 150]
       python bench/scheduler.py --nodes 5000 --pending 50000 --backlog 10000 --runs 3
       python bench/scheduler.py --quick
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_quiet import code_version
from ringleader.sched import (
    BUILD,
    BUILD_PREEMPTIBLE,
    INFERENCE,
    TRAIN,
    Decisions,
    Department,
    Gpu,
    GpuShare,
    Limits,
    Node,
    PodBinding,
    PodRequest,
    PoolQuota,
    Project,
    Quota,
    Snapshot,
    Workload,
    schedule,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
GiB = 1024**3
SEED = 20261121
GPUS_PER_NODE = 8
GPU_MEMORY = 80 * GiB
NODE_CORES = 128.0
NODE_MEMORY = 2048 * GiB
POOL = "default"
TARGET_CYCLE_S = 1.0
TARGET_PODS_PER_S = 10_000.0
PEER_PODS_PER_S = 800.0  # kube-scheduler, published scheduler_perf figure (not run here)
RECLAIM_FRACTION = 0.05


# ----- the snapshots --------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One kind of workload: how often it is drawn and how its pods look."""

    name: str
    weight: float
    pods: Sequence[tuple[int, float]]  # (pod count, weight)
    gpus: Sequence[tuple[int, float]] = ((1, 1.0),)  # whole devices per pod, weighted
    portions: Sequence[float] = ()  # a portion of one device, drawn uniformly
    gpu_memory_gib: Sequence[int] = ()  # or this much of one device's memory
    priorities: Sequence[tuple[int, float]] = ((TRAIN, 1.0),)
    elastic: float = 0.0  # chance that min_pods is half the pods


NOTEBOOK = ((BUILD, 3.0), (BUILD_PREEMPTIBLE, 1.0))
KINDS = (
    Kind("notebook, GPU portion", 16, [(1, 1)], portions=(0.25, 0.5), priorities=NOTEBOOK),
    Kind("notebook, GPU memory", 12, [(1, 1)], gpu_memory_gib=(10, 20, 40), priorities=NOTEBOOK),
    Kind(
        "inference, fractions",
        6,
        [(1, 2), (2, 2), (4, 1)],
        portions=(0.5,),
        gpu_memory_gib=(20,),
        priorities=[(INFERENCE, 1)],
    ),
    Kind("training, one pod", 42, [(1, 1)], gpus=[(1, 6), (2, 3), (4, 2), (8, 1)]),
    Kind(
        "training, small gang",
        22,
        [(2, 4), (4, 3), (8, 2)],
        gpus=[(1, 3), (2, 1), (4, 1), (8, 1)],
        elastic=0.1,
    ),
    Kind(
        "training, large gang", 2, [(16, 4), (32, 2), (64, 1)], gpus=[(1, 1), (8, 2)], elastic=0.1
    ),
)


def pick(rng: random.Random, weighted: Sequence[tuple[Any, float]]) -> Any:
    return rng.choices([v for v, _ in weighted], [w for _, w in weighted])[0]


def make_nodes(count: int) -> tuple[Node, ...]:
    gpus = tuple(Gpu(i, GPU_MEMORY) for i in range(GPUS_PER_NODE))
    return tuple(Node(f"node-{i:05d}", NODE_CORES, NODE_MEMORY, gpus, POOL) for i in range(count))


def make_projects(
    rng: random.Random, gpus: int
) -> tuple[tuple[Project, ...], tuple[Department, ...]]:
    """20 projects in 4 departments; deserved GPUs add up to ``gpus``.

    Departments cap GPUs at 40% of the cluster each (160% in all: they bind
    only when a department's projects all run far over quota); three projects
    have a GPU limit of twice their deserved quota.
    """
    shares = [rng.uniform(0.5, 2.0) for _ in range(20)]
    deserved = [int(gpus * s / sum(shares)) for s in shares]
    deserved[0] += gpus - sum(deserved)
    departments = tuple(Department(f"dept-{d}", {POOL: Limits(gpu=0.4 * gpus)}) for d in range(4))
    projects = []
    for i, quota in enumerate(deserved):
        limit = 2.0 * quota if i % 7 == 3 else None
        weight = float(rng.choice((1, 1, 2, 3)))
        pool_quota = PoolQuota(gpu=Quota(float(quota), limit, weight))
        projects.append(Project(f"proj-{i:02d}", {POOL: pool_quota}, f"dept-{i % 4}"))
    return tuple(projects), departments


def make_workload(
    rng: random.Random, wid: str, project: str, kind: Kind, at: float, priority: int | None = None
) -> Workload:
    count = pick(rng, kind.pods)
    cores = 8.0
    if kind.portions or kind.gpu_memory_gib:
        use_portion = bool(kind.portions) and (not kind.gpu_memory_gib or rng.random() < 0.5)
        portion = rng.choice(kind.portions) if use_portion else None
        memory = None if use_portion else rng.choice(kind.gpu_memory_gib) * GiB
        devices, cores = 1, 4.0
    else:
        portion, memory, devices = None, None, pick(rng, kind.gpus)
        cores = 12.0 * devices
    pods = tuple(
        PodRequest(
            f"{wid}-{i}",
            cpu_cores=cores,
            memory_bytes=int(cores * 8) * GiB,
            gpu_devices=devices,
            gpu_portion=portion,
            gpu_memory_bytes=memory,
        )
        for i in range(count)
    )
    min_pods = count // 2 if count > 1 and rng.random() < kind.elastic else None
    return Workload(
        wid,
        project,
        pods,
        priority=pick(rng, kind.priorities) if priority is None else priority,
        submitted_at=at,
        min_pods=min_pods,
    )


def make_pending(
    rng: random.Random,
    count: int,
    projects: Sequence[str],
    prefix: str = "w",
    priority: int | None = None,
) -> list[Workload]:
    """``count`` pending workloads of KINDS, spread over ``projects`` and a day;
    ``priority``, when given, replaces the kind's."""
    kinds = [(k, k.weight) for k in KINDS]
    return [
        make_workload(
            rng,
            f"{prefix}-{i:06d}",
            rng.choice(projects),
            pick(rng, kinds),
            rng.uniform(0, 86400),
            priority,
        )
        for i in range(count)
    ]


def base_snapshot(nodes: int = 1000, pending: int = 10_000, seed: int = SEED) -> Snapshot:
    """An empty cluster of ``nodes`` and ``pending`` workloads; the workloads depend
    only on the seed and their count, not on ``nodes``."""
    projects, departments = make_projects(random.Random(seed), nodes * GPUS_PER_NODE)
    names = [p.name for p in projects]
    workloads = make_pending(random.Random(seed + 1), pending, names)
    return Snapshot(make_nodes(nodes), projects, tuple(workloads), departments)


def reclaim_snapshot(nodes: int = 1000, backlog: int = 2000, seed: int = SEED) -> Snapshot:
    """A full cluster; the projects under quota ask for RECLAIM_FRACTION of it.

    Every node is given to one project, whole: each of the ten *under*
    projects gets nodes for 85% of its deserved GPUs (rounded down), the ten
    *over* projects the rest: nodes for their deserved GPUs plus the excess
    shared by over-quota weight, so each runs above its fair share by its
    weight's part of the under projects' new work. That work (in quota, 5% of
    the cluster's GPUs in all, by deserved quota: 8-GPU pods in gangs of 1 or 2,
    or one pod of 1 to 4 GPUs) can only be placed by reclaiming. A project's
    nodes hold, by chance per node: one pod of a gang of 8-GPU pods (gangs of
    1, 2 or 4 nodes), eight 1-GPU or four 2-GPU one-pod workloads, or sixteen
    half-GPU notebooks. Running workloads are preemptible but the under
    projects' notebooks; their submit times are drawn, so victims (the newest
    first) are of every shape.
    """
    rng = random.Random(seed + 2)
    total = nodes * GPUS_PER_NODE
    projects, departments = make_projects(random.Random(seed), total)
    over, under = projects[:10], projects[10:]
    deserved = {p.name: float(p.quotas[POOL].gpu.deserved or 0) for p in projects}
    under_nodes = [int(0.85 * deserved[p.name]) // GPUS_PER_NODE for p in under]
    spare = nodes - sum(under_nodes)
    excess = spare - sum(deserved[p.name] for p in over) / GPUS_PER_NODE
    weights = [p.quotas[POOL].gpu.over_quota_weight for p in over]
    wanted_nodes = [
        deserved[p.name] / GPUS_PER_NODE + excess * w / sum(weights)
        for p, w in zip(over, weights, strict=True)
    ]
    over_nodes = [int(x) for x in wanted_nodes]
    by_remainder = sorted(range(len(over)), key=lambda k: int(wanted_nodes[k]) - wanted_nodes[k])
    for k in by_remainder[: spare - sum(over_nodes)]:
        over_nodes[k] += 1
    node_list = make_nodes(nodes)
    cursor = 0
    running: list[Workload] = []
    for project, count in zip([*over, *under], [*over_nodes, *under_nodes], strict=True):
        mine = node_list[cursor : cursor + count]
        cursor += count
        running.extend(fill_nodes(rng, project.name, mine, preemptible=project in over))
    assert cursor == nodes
    wanted = RECLAIM_FRACTION * total
    pending: list[Workload] = []
    under_deserved = sum(deserved[p.name] for p in under)
    for project, count in zip(under, under_nodes, strict=True):
        room = deserved[project.name] - count * GPUS_PER_NODE
        gpus = min(round(wanted * deserved[project.name] / under_deserved), int(room))
        i = 0
        while gpus > 0:
            size = min(gpus, rng.choice((1, 2, 4, 8, 8, 16)))
            size = size if size <= 8 else size // 8 * 8
            pods, devices = (size // 8, 8) if size >= 8 else (1, size)
            wid = f"{project.name}-new-{i:03d}"
            pending.append(
                Workload(
                    wid,
                    project.name,
                    tuple(
                        PodRequest(f"{wid}-{j}", 12.0 * devices, 96 * devices * GiB, devices)
                        for j in range(pods)
                    ),
                    priority=rng.choice((TRAIN, TRAIN, BUILD)),
                    submitted_at=86400 + rng.uniform(0, 600),
                )
            )
            gpus -= size
            i += 1
    over_names = [p.name for p in over]
    pending += make_pending(rng, backlog, over_names, prefix="backlog", priority=TRAIN)
    return Snapshot(node_list, projects, tuple(running + pending), departments)


def fill_nodes(
    rng: random.Random, project: str, nodes: Sequence[Node], preemptible: bool
) -> list[Workload]:
    """Running workloads of ``project`` that fill ``nodes`` (see reclaim_snapshot)."""
    result: list[Workload] = []
    i = 0

    def add(pods: list[tuple[PodRequest, PodBinding]], priority: int) -> None:
        result.append(
            Workload(
                f"{project}-run-{len(result):05d}",
                project,
                tuple(p for p, _ in pods),
                priority=priority,
                preemptible=True if priority == TRAIN else None,
                submitted_at=rng.uniform(0, 86400),
                bindings=tuple(b for _, b in pods),
            )
        )

    while i < len(nodes):
        shape = rng.random()
        if shape < 0.5:  # a gang of 8-GPU pods, one node each
            size = min(rng.choice((1, 2, 4)), len(nodes) - i)
            wid = f"{project}-run-{len(result):05d}"
            pods = []
            for j in range(size):
                pod = PodRequest(f"{wid}-{j}", 96.0, 768 * GiB, GPUS_PER_NODE)
                shares = tuple(GpuShare(g) for g in range(GPUS_PER_NODE))
                pods.append((pod, PodBinding(pod.name, nodes[i + j].name, shares)))
            add(pods, TRAIN)
            i += size
            continue
        node = nodes[i].name
        if shape < 0.85:  # one-pod training on 1 or 2 whole GPUs
            devices = rng.choice((1, 2))
            for g in range(0, GPUS_PER_NODE, devices):
                wid = f"{project}-run-{len(result):05d}"
                pod = PodRequest(f"{wid}-0", 12.0 * devices, 96 * devices * GiB, devices)
                binding = PodBinding(pod.name, node, tuple(GpuShare(g + d) for d in range(devices)))
                add([(pod, binding)], TRAIN)
        else:  # half-GPU notebooks, two per device
            for g in range(GPUS_PER_NODE * 2):
                wid = f"{project}-run-{len(result):05d}"
                pod = PodRequest(f"{wid}-0", 4.0, 32 * GiB, 1, gpu_portion=0.5)
                binding = PodBinding(pod.name, node, (GpuShare(g // 2, 0.5),))
                add([(pod, binding)], TRAIN if preemptible else BUILD)
        i += 1
    return result


# ----- measuring ------------------------------------------------------------------------


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs so far, from /proc/stat."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def calibrate() -> float:
    """Milliseconds for a fixed pure-Python loop: how fast this (virtual) CPU is now."""
    started = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i * i
    return (time.perf_counter() - started) * 1000


# How hard to try for a machine that other work leaves alone (set from the flags).
QUIET = {"wait_budget_s": 0.0, "idle_below": 0.25, "max_other_cores": 0.25, "tries": 1}
RETRIED: list[dict[str, Any]] = []  # samples measured again because other work ran meanwhile


def wait_quiet() -> None:
    """Wait while the CPUs are busy with other work, from a budget for the whole run
    (``QUIET["wait_budget_s"]``), so a long test run nearby costs minutes, not hours."""
    while QUIET["wait_budget_s"] > 0:
        before = machine_busy()
        time.sleep(1)
        after = machine_busy()
        QUIET["wait_budget_s"] -= 1
        if (after[0] - before[0]) / max(after[1] - before[1], 1) < QUIET["idle_below"]:
            return


def digest(decisions: Decisions) -> str:
    """A fingerprint of every decision, to the last float: runs are compared by
    it, so that no run's decisions are still alive (for the garbage collector
    to walk) while the next is timed."""
    return hashlib.sha256(repr(decisions).encode()).hexdigest()


def timed_cycle(name: str, snapshot: Snapshot) -> tuple[str, dict[str, float]]:
    """One cycle, with its wall and CPU time and other processes' CPU meanwhile.

    Measured again (at most ``QUIET["tries"]`` times in all) while other
    processes used more than ``QUIET["max_other_cores"]`` cores; of the tries,
    the one with the least other work is kept, the rest are recorded.
    """
    clock = os.sysconf("SC_CLK_TCK")
    tries: list[tuple[str, dict[str, float]]] = []
    collecting = {"since": 0.0, "total": 0.0}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting["since"] = time.perf_counter()
        else:
            collecting["total"] += time.perf_counter() - collecting["since"]

    for _ in range(int(QUIET["tries"])):
        wait_quiet()
        gc.collect()
        speed = calibrate()
        collecting["total"] = 0.0
        gc.callbacks.append(on_gc)
        busy_before, cpu_before = machine_busy(), time.process_time()
        started = time.perf_counter()
        try:
            decisions = schedule(snapshot)
        finally:
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu_before
            gc.callbacks.remove(on_gc)
        busy_after = machine_busy()
        other = max(0.0, (busy_after[0] - busy_before[0]) / clock - cpu) / max(wall, 1e-9)
        sample = {
            "wall_s": wall,
            "cpu_s": cpu,
            "gc_s": collecting["total"],
            "other_cores": other,
            "calibration_ms": speed,
        }
        tries.append((digest(decisions), sample))
        del decisions
        if other <= QUIET["max_other_cores"]:
            break
    kept = min(tries, key=lambda t: t[1]["other_cores"])
    RETRIED.extend({"cycle": name, **t[1]} for t in tries if t is not kept)
    return kept


def outcome(snapshot: Snapshot, decisions: Decisions) -> dict[str, Any]:
    """What the cycle decided, counted."""
    pending = [w for w in snapshot.workloads if not w.running]
    gpus = sum(s.share for p in decisions.placements for b in p.pods for s in b.gpus)
    capacity = sum(len(n.gpus) for n in snapshot.nodes)
    held = sum(s.share for w in snapshot.workloads for b in w.bindings for s in b.gpus)
    freed = {w.id: w for w in snapshot.workloads}
    freed_gpus = sum(
        s.share for p in decisions.preemptions for b in freed[p.workload].bindings for s in b.gpus
    )
    return {
        "pending_before": len(pending),
        "pending_pods_before": sum(len(w.pods) for w in pending),
        "running_before": len(snapshot.workloads) - len(pending),
        "workloads_placed": len({p.workload for p in decisions.placements}),
        "pods_placed": sum(len(p.pods) for p in decisions.placements),
        "gpus_placed": round(gpus, 3),
        "workloads_pending_after": len(decisions.pending),
        "pending_causes": dict(Counter(p.cause for p in decisions.pending)),
        "preemptions": len(decisions.preemptions),
        "gpus_preempted": round(freed_gpus, 3),
        "gpu_allocation_after": round((held - freed_gpus + gpus) / capacity, 4),
    }


def bench_cycle(name: str, snapshot: Snapshot, runs: int) -> dict[str, Any]:
    first = schedule(snapshot)  # warm-up, and the reference decisions
    counted, reference = outcome(snapshot, first), digest(first)
    del first
    samples = []
    for _ in range(runs):
        fingerprint, sample = timed_cycle(name, snapshot)
        if fingerprint != reference:
            raise AssertionError(f"{name}: a cycle's decisions differ from the first's")
        samples.append(sample)
    walls = [s["wall_s"] for s in samples]
    result = {
        "name": name,
        "nodes": len(snapshot.nodes),
        "gpus": sum(len(n.gpus) for n in snapshot.nodes),
        "workloads": len(snapshot.workloads),
        "runs": runs,
        "wall_s": {"median": statistics.median(walls), "min": min(walls), "max": max(walls)},
        "cpu_s_median": statistics.median(s["cpu_s"] for s in samples),
        "gc_s_median": statistics.median(s["gc_s"] for s in samples),
        "samples": samples,
        **counted,
    }
    result["pods_per_s"] = result["pods_placed"] / result["wall_s"]["median"]
    print(
        f"{name}: {result['wall_s']['median'] * 1000:.0f} ms median "
        f"({result['wall_s']['min'] * 1000:.0f}-{result['wall_s']['max'] * 1000:.0f}), "
        f"{result['pods_placed']} pods / {result['workloads_placed']} workloads placed, "
        f"{result['pods_per_s']:,.0f} pods/s, {result['preemptions']} preemptions, "
        f"other work {max(s['other_cores'] for s in samples):.2f} cores at most",
        flush=True,
    )
    return result


def growth_lines(
    base: dict[str, Any], reclaim: dict[str, Any], scaling: list[dict[str, Any]]
) -> list[str]:
    """One line per dimension: 1x, 2x, 4x... wall times and their ratios to 1x."""
    lines = []
    for dimension, first in (("nodes", base), ("pending", base), ("reclaim", reclaim)):
        steps = [f"1x {first['wall_s']['median']:.3f} s"]
        for row in scaling:
            if row["label"].endswith(f"x {dimension}"):
                steps.append(
                    f"{row['factor']}x {row['wall_s']['median']:.3f} s "
                    f"({row['ratio']:.2f}x; CPU {row['cpu_ratio']:.2f}x)"
                )
        lines.append(f"growth in {dimension}: " + ", ".join(steps))
    return lines


def bench_incremental(snapshot: Snapshot, runs: int) -> dict[str, Any]:
    """``IncrementalScheduler``: a cycle over the unchanged snapshot, and over the
    snapshot with one more pending workload, against a full cycle of the latter
    (medians; the decisions must be equal)."""
    from ringleader.sched import IncrementalScheduler

    extra = make_pending(random.Random(SEED + 9), 1, [snapshot.projects[0].name], "late")
    later = Snapshot(
        snapshot.nodes, snapshot.projects, (*snapshot.workloads, *extra), snapshot.departments
    )
    unchanged, arrival, full = [], [], []
    for _ in range(max(runs, 1)):
        scheduler = IncrementalScheduler()
        scheduler.schedule(snapshot)
        gc.collect()
        started = time.perf_counter()
        scheduler.schedule(snapshot)
        unchanged.append(time.perf_counter() - started)
        started = time.perf_counter()
        incremental = digest(scheduler.schedule(later))
        arrival.append(time.perf_counter() - started)
        gc.collect()
        started = time.perf_counter()
        whole = digest(schedule(later))
        full.append(time.perf_counter() - started)
        if incremental != whole:
            raise AssertionError("an incremental cycle decided otherwise than a full one")
    result = {
        "unchanged_s": statistics.median(unchanged),
        "one_arrival_s": statistics.median(arrival),
        "one_arrival_full_s": statistics.median(full),
    }
    print(f"incremental: {result}", flush=True)
    return result


def phases(snapshot: Snapshot) -> dict[str, float]:
    """Seconds per phase of one cycle, from timers wrapped round ``_Cycle``'s passes,
    and how much of the cycle the garbage collector took (``gc.callbacks``).

    Private API, and the timers cost a little per workload: an approximate
    split, not a total to quote.
    """
    from ringleader.sched.scheduler import _Cycle

    spent: Counter[str] = Counter()

    def timer(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args)
            finally:
                spent[label] += time.perf_counter() - started

        return wrapped

    collecting: dict[str, float] = {}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting["since"] = time.perf_counter()
        else:
            spent[f"of which the garbage collector (generation {info['generation']})"] += (
                time.perf_counter() - collecting["since"]
            )

    gc.collect()
    gc.callbacks.append(on_gc)
    try:
        started = time.perf_counter()
        cycle = _Cycle(snapshot)
        spent["setup: state, demand, fair shares"] = time.perf_counter() - started
        for label, method in (
            ("pass 1: in quota", "_admit_in_quota"),
            ("pass 2: up to fair share", "_admit_up_to_fair_share"),
            ("pass 3: leftovers", "_admit_into_leftovers"),
            ("pass 4: elastic extras", "_place_extras"),
        ):
            setattr(cycle, method, timer(label, getattr(cycle, method)))
        started = time.perf_counter()
        cycle.run()
        total = time.perf_counter() - started
    finally:
        gc.callbacks.remove(on_gc)
    spent["decisions and pending reasons"] = total - sum(
        v for k, v in spent.items() if k.startswith("pass")
    )
    main = [k for k in spent if not k.startswith("of which")]  # in the order they ran
    return {k: round(spent[k], 4) for k in [*main, *sorted(set(spent) - set(main))]}


# ----- report ---------------------------------------------------------------------------


def markdown(report: dict[str, Any]) -> str:
    base, reclaim = report["base"], report["reclaim"]
    code, machine = report["code"], report["machine"]
    dirty = (
        f" plus uncommitted changes to {len(code['uncommitted_in_sched'])} file(s) of "
        "src/ringleader/sched"
        if code["uncommitted_in_sched"]
        else ""
    )

    def ms(value: float) -> str:
        return f"{value * 1000:,.0f} ms"

    def spread(result: dict[str, Any]) -> str:
        wall = result["wall_s"]
        return (
            f"{ms(wall['median'])} (min {ms(wall['min'])}, max {ms(wall['max'])}; "
            f"CPU {ms(result['cpu_s_median'])}; garbage collector {ms(result['gc_s_median'])})"
        )

    def ok(met: bool) -> str:
        return "met" if met else "**not met**"

    def peer(pods_per_s: float) -> str:
        return f"{pods_per_s / PEER_PODS_PER_S:.1f}x"

    lines = [
        "# Scheduler benchmark: one `schedule()` cycle on a simulated cluster",
        "",
        f"{report['date']}; commit {code['commit'][:7]}{dirty}; {machine['cpus']} CPUs "
        f"(shared); Python {machine['python']} ({machine['implementation']}); "
        f"median of {base['runs']} timed runs after a warm-up (scaling: "
        f"{report['scaling_runs']}).",
        "",
        "| metric | value | target | vs kube-scheduler (~800 pods/s, published) |",
        "|---|---|---|---|",
        f"| full cycle: {base['nodes']:,} nodes x 8 GPUs, 20 projects, "
        f"{base['pending_before']:,} pending workloads ({base['pending_pods_before']:,} pods) "
        f"| {spread(base)} | < 1 s ({ok(base['wall_s']['median'] < TARGET_CYCLE_S)}) | |",
        f"| pods placed per second (full cycle) | {base['pods_per_s']:,.0f} "
        f"({base['pods_placed']:,} pods of {base['workloads_placed']:,} workloads placed) "
        f"| >= 10,000 ({ok(base['pods_per_s'] >= TARGET_PODS_PER_S)}) "
        f"| {peer(base['pods_per_s'])} |",
        f"| after the full cycle | {base['workloads_pending_after']:,} workloads pending, "
        f"each with a reason; GPUs {base['gpu_allocation_after']:.1%} allocated | | |",
        f"| reclaim cycle: full cluster ({reclaim['running_before']:,} running workloads), "
        f"{reclaim['pending_before']:,} pending | {spread(reclaim)} | | |",
        f"| reclaim: preemptions, GPUs freed, pods placed | {reclaim['preemptions']} "
        f"workloads, {reclaim['gpus_preempted']:g} GPUs "
        f"({reclaim['gpus_preempted'] / reclaim['gpus']:.1%}), {reclaim['pods_placed']:,} "
        f"pods of {reclaim['workloads_placed']:,} workloads | | |",
    ]
    for row in report["scaling"]:
        lines.append(
            f"| scaling, {row['label']}: {row['nodes']:,} nodes, {row['pending_before']:,} "
            f"pending | {ms(row['wall_s']['median'])} (CPU {ms(row['cpu_s_median'])}; "
            f"garbage collector {ms(row['gc_s_median'])}): "
            f"{row['ratio']:.2f}x the 1x time (CPU {row['cpu_ratio']:.2f}x); "
            f"{row['pods_placed']:,} pods placed, {row['preemptions']} preemptions | | "
            f"{peer(row['pods_per_s'])} |"
        )
    inc = report["incremental"]
    lines.append(
        f"| incremental cycle, base snapshot unchanged / one workload arrived "
        f"| {ms(inc['unchanged_s'])} / {ms(inc['one_arrival_s'])} (a full cycle of the "
        f"latter: {ms(inc['one_arrival_full_s'])}; decisions equal) | | |"
    )
    lines += ["", "Growth (wall time, each against its 1x; linear or better is <= the factor):", ""]
    lines += [f"- {line}" for line in report["growth"]]
    load = report["load_average"]
    lines += [
        "",
        "Load average (1, 5, 15 min) at the start: "
        f"{', '.join(f'{x:.2f}' for x in load['start'])}; "
        f"at the end: {', '.join(f'{x:.2f}' for x in load['end'])}.",
    ]
    lines += [
        "",
        "Per phase of one more base cycle (timers round the passes; approximate):",
        "",
        "| phase | ms |",
        "|---|---|",
        *(f"| {k} | {v * 1000:.0f} |" for k, v in report["phases"].items()),
    ]
    cycles = [base, reclaim, *report["scaling"]]
    other = [s["other_cores"] for r in cycles for s in r["samples"]]
    calib = [s["calibration_ms"] for r in cycles for s in r["samples"]]
    per_workload = base["wall_s"]["median"] / base["pending_before"] * 1e6
    shared = [
        r.get("label", r["name"])
        for r in cycles
        if any(s["other_cores"] > report["quiet"]["max_other_cores"] for s in r["samples"])
    ]
    noisy = "kept runs with more: " + ", ".join(shared) if shared else "none above the bar"
    quiet = report["quiet"]
    lines += [
        "",
        "Notes:",
        "",
        "- Method: `schedule(snapshot)` called in-process on a prebuilt snapshot (building it "
        "is not timed; bench/scheduler.py's docstring describes the generator, seeded "
        f"{report['seed']}). Each cycle runs once untimed, then is timed with "
        "`time.perf_counter` after `gc.collect()` (`schedule` pauses the collector itself); "
        "every run's decisions must equal the first's (compared by a SHA-256 of their repr, so "
        "that no earlier run's decisions stay alive while the next is timed). Pods/s = pods "
        "bound by the cycle / its median wall time, so the time spent on the workloads that "
        "stay pending (and on their reasons) counts against it.",
        "- Base mix: "
        + ", ".join(f"{k} {v:,}" for k, v in report["mix"]["kinds"].items())
        + "; pods per workload: "
        + ", ".join(f"{k}: {v:,}" for k, v in report["mix"]["pods"].items())
        + f". GPUs asked for: {report['mix']['gpus_asked']:,.0f}, "
        f"{report['mix']['gpus_asked'] / base['gpus']:.1f}x the cluster, so most workloads "
        "end pending (a deep queue): the cycle fills the cluster in priority order and "
        "explains the rest.",
        "- Reclaim: ten projects run over their deserved quota on the whole cluster (8-GPU "
        "gangs, 1- and 2-GPU pods, half-GPU notebooks); the ten under quota submit in-quota "
        f"work for {RECLAIM_FRACTION:.0%} of the GPUs "
        f"({report['reclaim_new_workloads']} workloads), which only reclaiming can place; "
        f"the over-quota projects also have {report['reclaim_backlog']:,} pending training "
        "workloads that stay pending. Victims are whole workloads, the fewest that make room.",
        f"- Scaling: {base['nodes']:,} nodes times each factor keep the "
        f"{base['pending_before']:,} pending workloads (quotas scale with the cluster), so "
        "more of them are placed; pending times each factor keep the nodes, and the extra "
        "workloads (drawn from the same mix) both fill the cluster with more small pods "
        "and wait; reclaim times each factor grows the full cluster and the backlog together. "
        "The scheduler's own work follows pending workloads plus placed pods "
        f"({per_workload:.0f} us per pending workload at the base); the cycle pauses "
        "Python's garbage collector (whose full passes walk every live object).",
        "- Peer: ~800 pods/s is kube-scheduler's published integration-benchmark "
        "(scheduler_perf) throughput, as the issue quotes it; it needs a Kubernetes tree, "
        "etcd and Go, so it was not run here and the ratio is to that figure, not to a "
        "measurement on this machine. kube-scheduler binds pods one at a time through "
        "filter and score plugins and an API call each; this is one pure function over a "
        "snapshot, gangs and quotas included, without the API server.",
        f"- Shared machine: each timed run waited (from a budget of "
        f"{quiet['wait_budget_s']:.0f} s for the whole run) for idle CPUs and was measured "
        f"again, up to {quiet['tries']} times in all, while other processes used more than "
        f"{quiet['max_other_cores']} cores, keeping the try with the least: "
        f"{len(report['retried'])} tries set aside; other work during the kept runs: median "
        f"{statistics.median(other):.2f}, max {max(other):.2f} cores ({noisy}). CPU is this "
        "process's CPU time, which other work does not inflate much: where it is well below "
        "the wall time, the process waited for a core. A fixed pure-Python loop took "
        f"{statistics.median(calib):.0f} "
        f"ms (median; min {min(calib):.0f}, max {max(calib):.0f}) before the runs: this VM's "
        "CPU speed varies over hours, and every time here varies with it.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs of base and reclaim")
    parser.add_argument("--scaling-runs", type=int, default=3, help="timed runs per scaling step")
    parser.add_argument(
        "--factors",
        default="2,4",
        help="growth steps: nodes, pending and the reclaim cluster times each (e.g. 2,4)",
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--backlog", type=int, default=2000, help="pending work in reclaim")
    parser.add_argument(
        "--wait-budget",
        type=float,
        default=150.0,
        help="seconds in all to wait for idle CPUs before timed runs",
    )
    parser.add_argument("--tries", type=int, default=3, help="measures per run at most")
    parser.add_argument(
        "--quick", action="store_true", help="100 nodes, 1,000 pending, 1 run; writes nothing"
    )
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.pending, args.backlog, args.runs, args.scaling_runs = 100, 1000, 200, 1, 1
        args.wait_budget, args.tries = 0.0, 1
    QUIET.update(wait_budget_s=args.wait_budget, tries=args.tries)
    quiet = dict(QUIET)
    started = time.monotonic()
    load_start = os.getloadavg()
    print(f"load average at start: {load_start}", flush=True)
    base_snap = base_snapshot(args.nodes, args.pending)
    base = bench_cycle("base", base_snap, args.runs)
    phase_split = phases(base_snap)
    print("phases:", phase_split, flush=True)
    reclaim_snap = reclaim_snapshot(args.nodes, args.backlog)
    reclaim = bench_cycle("reclaim", reclaim_snap, args.runs)
    scaling = []
    factors = [int(f) for f in args.factors.split(",") if f.strip()]
    for factor in factors:
        for label, snapshot, reference in (
            (f"{factor}x nodes", base_snapshot(factor * args.nodes, args.pending), base),
            (f"{factor}x pending", base_snapshot(args.nodes, factor * args.pending), base),
            (
                f"{factor}x reclaim",
                reclaim_snapshot(factor * args.nodes, factor * args.backlog),
                reclaim,
            ),
        ):
            row = bench_cycle(label, snapshot, args.scaling_runs)
            del snapshot
            row["label"] = label
            row["factor"] = factor
            row["ratio"] = row["wall_s"]["median"] / reference["wall_s"]["median"]
            row["cpu_ratio"] = row["cpu_s_median"] / reference["cpu_s_median"]
            scaling.append(row)
    growth = growth_lines(base, reclaim, scaling)
    print("\n".join(growth), flush=True)
    incremental = bench_incremental(base_snap, args.runs)
    pending = [w for w in base_snap.workloads if not w.running]
    kinds = Counter(classify(w) for w in pending)
    pods = Counter(len(w.pods) for w in pending)
    report = {
        "benchmark": "scheduler",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
        },
        "code": code_version("src/ringleader/sched", "uncommitted_in_sched"),
        "seed": SEED,
        "targets": {"cycle_s": TARGET_CYCLE_S, "pods_per_s": TARGET_PODS_PER_S},
        "peer": {
            "name": "kube-scheduler, scheduler_perf integration benchmark (published; not run)",
            "pods_per_s": PEER_PODS_PER_S,
        },
        "mix": {
            "kinds": dict(sorted(kinds.items())),
            "pods": {str(k): pods[k] for k in sorted(pods)},
            "gpus_asked": sum(gpus_asked(w) for w in pending),
        },
        "reclaim_backlog": args.backlog,
        "reclaim_new_workloads": sum("-new-" in w.id for w in reclaim_snap.workloads),
        "scaling_runs": args.scaling_runs,
        "quiet": quiet,
        "retried": RETRIED,
        "base": base,
        "reclaim": reclaim,
        "scaling": scaling,
        "growth": growth,
        "incremental": incremental,
        "load_average": {"start": load_start, "end": os.getloadavg()},
        "phases": phase_split,
        "met": {
            "cycle_under_1s": base["wall_s"]["median"] < TARGET_CYCLE_S,
            "pods_per_s_at_least_10000": base["pods_per_s"] >= TARGET_PODS_PER_S,
        },
        "bench_wall_s": round(time.monotonic() - started, 1),
    }
    text = markdown(report)
    print(text)
    if args.quick:
        print("--quick: nothing written")
        return 0
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scheduler.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "scheduler.md").write_text(text)
    print(f"wrote {RESULTS / 'scheduler.json'} and {RESULTS / 'scheduler.md'}")
    return 0


def gpus_asked(workload: Workload) -> float:
    """Devices the workload's pods ask for, a memory fraction as its share of 80 GiB."""
    total = 0.0
    for pod in workload.pods:
        share = pod.gpu_portion
        if share is None:
            share = 1.0 if pod.gpu_memory_bytes is None else pod.gpu_memory_bytes / GPU_MEMORY
        total += pod.gpu_devices * share
    return total


def classify(workload: Workload) -> str:
    """The workload's kind, from its first pod (for the mix in the report)."""
    pod = workload.pods[0]
    if pod.gpu_portion is not None:
        return "fraction: portion"
    if pod.gpu_memory_bytes is not None:
        return "fraction: GPU memory"
    return f"whole GPUs: {'gang' if len(workload.pods) > 1 else 'one pod'}"


if __name__ == "__main__":
    sys.exit(main())

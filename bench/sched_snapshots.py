"""The scheduler benchmark's snapshots: seeded simulated clusters and queues
(bench/scheduler.py's docstring says what each holds and why).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ringleader.sched import (
    BUILD,
    BUILD_PREEMPTIBLE,
    INFERENCE,
    TRAIN,
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
)

GiB = 1024**3
SEED = 20261121
GPUS_PER_NODE = 8
GPU_MEMORY = 80 * GiB
NODE_CORES = 128.0
NODE_MEMORY = 2048 * GiB
POOL = "default"
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

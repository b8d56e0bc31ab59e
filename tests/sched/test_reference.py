"""Reference cycles: fixed, seeded snapshots whose decisions must not change.

The scheduler is tuned for speed (bench/scheduler.py); these pin what it
decides, to the last float, on clusters large enough to reach every path at
once: gangs of many shapes, fractions by portion and by memory on devices of
two sizes (shares that are not exact in binary), project and department
limits, two pools and a node that is not ready, elastic gangs, reclaim and
priority preemption on a full cluster (victims chosen, then the fewest kept),
both strategies.  The digests were taken before the tuning; a change of
policy that is meant to change decisions updates them (print ``digest(...)``).
"""

from __future__ import annotations

import hashlib
import random

import pytest

from ringleader.sched import (
    BUILD,
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

GiB = 1024**3


def nodes(rng: random.Random, count: int) -> list[Node]:
    """8-GPU nodes, every third one of 48 GiB devices (odd memory shares),
    a second pool, and one node that is not ready."""
    result = []
    for i in range(count):
        memory = 48 * GiB if i % 3 == 0 else 80 * GiB
        result.append(
            Node(
                f"n{i:03d}",
                cpu_cores=rng.choice((96.0, 128.0, 100.5)),
                memory_bytes=rng.choice((1024, 2048)) * GiB,
                gpus=tuple(Gpu(g, memory) for g in range(8)),
                pool="other" if i % 5 == 4 else "default",
                ready=i != 7,
            )
        )
    return result


def projects(rng: random.Random, gpus: int) -> tuple[list[Project], list[Department]]:
    departments = [
        Department("d0", {"default": Limits(gpu=0.5 * gpus)}),
        Department("d1", {"default": Limits(gpu=0.3 * gpus, cpu=4000.0)}),
    ]
    result = []
    for i in range(8):
        deserved = round(gpus / 8 * rng.uniform(0.6, 1.4))
        quota = PoolQuota(
            gpu=Quota(deserved, 1.5 * deserved if i == 3 else None, rng.choice((1.0, 2.0, 3.0)))
        )
        other = PoolQuota(gpu=Quota(gpus // 40, None, 1.0))
        result.append(
            Project(f"p{i}", {"default": quota, "other": other}, ("d0", "d1", None)[i % 3])
        )
    return result, departments


def pending(rng: random.Random, count: int, names: list[str], prefix: str) -> list[Workload]:
    result = []
    for i in range(count):
        wid = f"{prefix}{i:04d}"
        shape = rng.random()
        pods: tuple[PodRequest, ...]
        if shape < 0.3:  # one fractional pod: a portion or memory
            portion = rng.choice((0.25, 0.3, 0.5, None))
            memory = None if portion else rng.choice((10, 20, 24, 40)) * GiB
            pods = (PodRequest(f"{wid}-0", 2.5, 16 * GiB, 1, portion, memory),)
        elif shape < 0.9:  # a gang of whole GPUs
            size, devices = rng.choice((1, 1, 2, 4, 8)), rng.choice((1, 2, 4, 8))
            pods = tuple(
                PodRequest(f"{wid}-{j}", 8.0 * devices, 64 * devices * GiB, devices)
                for j in range(size)
            )
        else:  # a gang of mixed pods: a launcher and workers
            workers = (PodRequest(f"{wid}-{j}", 16.0, 128 * GiB, 2) for j in range(1, 5))
            pods = (PodRequest(f"{wid}-0", 4.0, 8 * GiB), *workers)
        result.append(
            Workload(
                wid,
                rng.choice([*names, "ghost"]) if i % 97 == 0 else rng.choice(names),
                pods,
                priority=rng.choice((TRAIN, TRAIN, TRAIN, BUILD, INFERENCE)),
                submitted_at=rng.uniform(0, 1000),
                min_pods=len(pods) // 2 if len(pods) > 2 and rng.random() < 0.2 else None,
                node_pools=("other", "default") if i % 11 == 0 else (),
            )
        )
    return result


def empty_cluster(seed: int, strategy: str) -> Snapshot:
    rng = random.Random(seed)
    cluster = nodes(rng, 40)
    owners, departments = projects(rng, 8 * len(cluster))
    work = pending(rng, 400, [p.name for p in owners], "w")
    return Snapshot(tuple(cluster), tuple(owners), tuple(work), tuple(departments), strategy)  # type: ignore[arg-type]


def full_cluster(seed: int, strategy: str) -> Snapshot:
    """Every device of the default pool taken (mostly by p0..p3, far over quota),
    then new work for everyone: reclaim, priority preemption, pending."""
    rng = random.Random(seed)
    cluster = nodes(rng, 40)
    owners, departments = projects(rng, 8 * len(cluster))
    running = []
    k = 0
    for node in cluster:
        if node.pool != "default" or not node.ready:
            continue
        if rng.random() < 0.5:  # one 8-GPU pod
            owner = f"p{rng.choice((0, 1, 2, 3, 4, 5))}"
            pod = PodRequest(f"r{k}-0", 32.0, 256 * GiB, 8)
            shares = tuple(GpuShare(g) for g in range(8))
            running.append(
                Workload(
                    f"r{k:04d}",
                    owner,
                    (pod,),
                    submitted_at=rng.uniform(0, 500),
                    bindings=(PodBinding(pod.name, node.name, shares),),
                )
            )
            k += 1
            continue
        for g in range(8):  # 1-GPU pods, or two half-GPU pods, of mixed priorities
            owner = f"p{rng.choice((0, 1, 2, 3))}"
            halves = rng.random() < 0.3
            for _ in range(2 if halves else 1):
                pod = PodRequest(f"r{k}-0", 4.0, 32 * GiB, 1, 0.5 if halves else None)
                share = GpuShare(g, 0.5) if halves else GpuShare(g)
                running.append(
                    Workload(
                        f"r{k:04d}",
                        owner,
                        (pod,),
                        priority=rng.choice((TRAIN, TRAIN, 75)),
                        submitted_at=rng.uniform(0, 500),
                        bindings=(PodBinding(pod.name, node.name, (share,)),),
                    )
                )
                k += 1
    work = pending(rng, 150, [p.name for p in owners], "n")
    return Snapshot(
        tuple(cluster),
        tuple(owners),
        tuple(running + work),
        tuple(departments),
        strategy,  # type: ignore[arg-type]
    )


def digest(decisions: Decisions) -> str:
    return hashlib.sha256(repr(decisions).encode()).hexdigest()[:16]


REFERENCE = {
    ("empty", 1, "binpack"): "e81206f4f75f54a8",
    ("empty", 1, "spread"): "b0196c813ba01334",  # spread counts pods (issue 13)
    ("empty", 2, "binpack"): "e3c96321cc78f18a",
    ("full", 3, "binpack"): "fd1813f39ee497f5",
    ("full", 3, "spread"): "513ad213b848b091",  # spread counts pods (issue 13)
    ("full", 4, "binpack"): "905ae87de9cd8e87",
}


@pytest.mark.parametrize(("kind", "seed", "strategy"), sorted(REFERENCE))
def test_reference_decisions_are_unchanged(kind: str, seed: int, strategy: str) -> None:
    build = empty_cluster if kind == "empty" else full_cluster
    decisions = schedule(build(seed, strategy))
    assert digest(decisions) == REFERENCE[kind, seed, strategy]


def test_reference_cycles_reach_the_paths_they_pin() -> None:
    """The snapshots above still exercise what they are meant to."""
    full = schedule(full_cluster(4, "binpack"))
    reasons = [p.reason for p in full.preemptions]
    assert any(r.startswith("reclaimed") for r in reasons)
    assert any(r.startswith("preempted by") for r in reasons)
    empty = schedule(empty_cluster(1, "binpack"))
    causes = {p.cause for p in empty.pending}
    assert {"capacity", "unknown-project"} <= causes
    assert {p.pool for p in empty.placements} == {"default", "other"}
    assert any(s.memory_bytes for p in empty.placements for b in p.pods for s in b.gpus)

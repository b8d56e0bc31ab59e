"""Hypothesis strategies for random clusters and scheduling cycles (the scheduler's property tests share them)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from ringleader.sched import (
    Department,
    Gpu,
    Limits,
    Node,
    PodRequest,
    PoolQuota,
    Project,
    Quota,
    Snapshot,
    Workload,
)
from tests.sched.helpers import GiB

EPS = 1e-6
POOLS = ("default", "other")
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def nodes(draw: st.DrawFn, crowded: bool = False) -> tuple[Node, ...]:
    """Up to 4 nodes of mixed shapes; ``crowded``: a few ready GPU nodes in one pool."""
    result = []
    for i in range(draw(st.integers(1, 3 if crowded else 4))):
        gpu_memory = draw(st.sampled_from([16, 40, 80])) * GiB
        result.append(
            Node(
                f"node-{i}",
                cpu_cores=32.0 if crowded else draw(st.sampled_from([4.0, 8.0, 16.0, 32.0])),
                memory_bytes=draw(st.sampled_from([16, 64, 256])) * GiB,
                gpus=tuple(Gpu(g, gpu_memory) for g in range(draw(st.integers(crowded * 2, 4)))),
                pool="default" if crowded else draw(st.sampled_from(POOLS)),
                ready=crowded or draw(st.booleans() | st.just(True)),
            )
        )
    return tuple(result)


def quotas(draw: st.DrawFn) -> dict[str, PoolQuota]:
    result = {}
    for pool in POOLS:
        deserved = draw(st.integers(0, 4))
        limit = draw(st.none() | st.integers(deserved, deserved + 4))
        cpu = draw(st.none() | st.integers(0, 16))
        result[pool] = PoolQuota(
            gpu=Quota(deserved, limit, draw(st.integers(0, 3))),
            cpu=Quota(cpu, draw(st.none() | st.just(None if cpu is None else cpu + 8))),
        )
    return result


@st.composite
def organisation(draw: st.DrawFn) -> tuple[tuple[Project, ...], tuple[Department, ...]]:
    departments = tuple(
        Department(
            f"dept-{i}",
            {pool: Limits(gpu=draw(st.none() | st.integers(0, 6))) for pool in POOLS},
        )
        for i in range(draw(st.integers(0, 2)))
    )
    names = [d.name for d in departments]
    projects = tuple(
        Project(
            f"proj-{i}",
            quotas(draw),
            draw(st.none() | st.sampled_from(names)) if names else None,
        )
        for i in range(draw(st.integers(1, 3)))
    )
    return projects, departments


@st.composite
def pod_request(draw: st.DrawFn, name: str, crowded: bool = False) -> PodRequest:
    kinds = (
        ["whole", "whole", "portion", "memory"]
        if crowded
        else ["none", "whole", "portion", "memory"]
    )
    kind = draw(st.sampled_from(kinds))
    devices = draw(st.integers(1, 3)) if kind == "whole" else int(kind != "none")
    if kind in ("portion", "memory"):
        devices = draw(st.sampled_from([1, 1, 2]))
    return PodRequest(
        name,
        cpu_cores=draw(st.sampled_from([0.0, 0.5, 1.0, 4.0, 8.0])),
        memory_bytes=draw(st.sampled_from([0, 1, 8, 32])) * GiB,
        gpu_devices=devices,
        gpu_portion=draw(st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.75, 1.0]))
        if kind == "portion"
        else None,
        gpu_memory_bytes=draw(st.sampled_from([4, 10, 20, 40])) * GiB if kind == "memory" else None,
    )


@st.composite
def workloads(
    draw: st.DrawFn, projects: tuple[Project, ...], prefix: str, crowded: bool = False
) -> list[Workload]:
    result = []
    for i in range(draw(st.integers(2 * crowded, 8))):
        wid = f"{prefix}{i}"
        count = draw(st.integers(1, 3))
        if draw(st.booleans()):  # identical pods, the usual distributed job
            one = draw(pod_request(f"{wid}-0", crowded))
            pods = [replace(one, name=f"{wid}-{k}") for k in range(count)]
        else:
            pods = [draw(pod_request(f"{wid}-{k}", crowded)) for k in range(count)]
        result.append(
            Workload(
                wid,
                draw(st.sampled_from([p.name for p in projects] * 9 + ["ghost"])),
                tuple(pods),
                priority=draw(st.sampled_from([50, 75, 100, 125])),
                preemptible=draw(st.none() | st.booleans()),
                submitted_at=draw(st.integers(0, 5)),
                min_pods=draw(st.none() | st.integers(1, count)),
                node_pools=tuple(draw(st.permutations(POOLS))[: draw(st.integers(0, 2))]),
            )
        )
    return result


@st.composite
def cycles(draw: st.DrawFn, crowded: bool = False) -> tuple[Snapshot, list[list[Workload]]]:
    """A first snapshot of pending work and one or two waves of arrivals."""
    projects, departments = draw(organisation())
    first = Snapshot(
        nodes=draw(nodes(crowded)),
        projects=projects,
        departments=departments,
        workloads=tuple(draw(workloads(projects, "w", crowded))),
        strategy=draw(st.sampled_from(["binpack", "spread"])),
    )
    waves = draw(st.integers(1, 2))
    arrivals = [draw(workloads(projects, f"c{c}-", crowded)) for c in range(waves)]
    return first, arrivals


# Half the examples crowd a few GPU nodes, where reclaim and preemption happen.
clusters = st.one_of(cycles(), cycles(crowded=True))

"""A snapshot that contradicts itself is refused when built, naming what is wrong."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ringleader.sched import (
    BUILD,
    TRAIN,
    Department,
    Gpu,
    GpuShare,
    Node,
    PodBinding,
    PodRequest,
    Project,
    Snapshot,
    Workload,
)
from tests.sched.helpers import gpu_node, job


def test_preemptible_follows_the_priority_unless_said() -> None:
    assert job("w", "a", priority=TRAIN).is_preemptible
    assert not job("w", "a", priority=BUILD).is_preemptible
    assert job("w", "a", priority=BUILD, preemptible=True).is_preemptible
    assert not job("w", "a", priority=TRAIN, preemptible=False).is_preemptible


def test_gang_size_defaults_to_every_pod() -> None:
    assert job("w", "a", pods=3).gang_size == 3
    assert job("w", "a", pods=3, min_pods=1).gang_size == 1


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: PodRequest("p", gpu_portion=0.5), "needs gpu_devices >= 1"),
        (lambda: PodRequest("p", gpu_devices=1, gpu_portion=1.5), "in (0, 1]"),
        (
            lambda: PodRequest("p", gpu_devices=1, gpu_portion=0.5, gpu_memory_bytes=10),
            "not both",
        ),
        (lambda: Workload("w", "a", ()), "no pods"),
        (lambda: job("w", "a", pods=2, min_pods=3), "min_pods"),
        (
            lambda: replace(job("w", "a"), bindings=(PodBinding("nope", "node-1"),)),
            "unknown or repeated pods",
        ),
        (lambda: Node("n", 1, 1, (Gpu(0, 1), Gpu(0, 1))), "duplicate GPU"),
        (lambda: Snapshot(nodes=(gpu_node("n"), gpu_node("n"))), "duplicate node 'n'"),
        (
            lambda: Snapshot(
                workloads=(replace(job("w", "a"), bindings=(PodBinding("w-0", "ghost"),)),)
            ),
            "unknown node ghost",
        ),
        (
            lambda: Snapshot(
                nodes=(gpu_node("n", 1),),
                workloads=(
                    replace(job("w", "a"), bindings=(PodBinding("w-0", "n", (GpuShare(5),)),)),
                ),
            ),
            "unknown GPU",
        ),
        (lambda: Snapshot(projects=(Project("p", department="d"),)), "unknown department d"),
        (lambda: Snapshot(strategy="random"), "unknown placement strategy"),  # type: ignore[arg-type]
    ],
)
def test_inconsistent_input_is_refused(build, message) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("]", r"\]")):
        build()


def test_lists_are_frozen_into_tuples() -> None:
    snapshot = Snapshot(nodes=[gpu_node("n")], departments=[Department("d")])  # type: ignore[arg-type]
    assert isinstance(snapshot.nodes, tuple) and isinstance(snapshot.departments, tuple)

"""The step split the metrics service derives from the ranks' ``comm`` (pure functions)."""

from __future__ import annotations

import json

import pytest

from ringleader.server.services import metric_series


def records(attempt: int, step_time: float, comm: float | None, n: int = 30) -> list[bytes]:
    rows = []
    for k in range(n):
        row: dict[str, object] = {"step": k, "time": 1000 + k * step_time, "samples": 32}
        if comm is not None:
            row["comm"] = comm
        rows.append(json.dumps(row).encode())
    return rows


def derived(lines: list[bytes], attempt: int = 0) -> list[metric_series.Raw]:
    parsed, _ = metric_series.parse(lines, attempt=attempt)
    metric_series.derive(parsed)
    return parsed


def test_points_carry_comm_and_compute() -> None:
    points = metric_series.downsample(derived(records(0, 0.5, 0.2)), 500)
    assert points[0].comm_time == 0.2 and points[0].compute_time is None  # no step time yet
    assert points[5].step_time == pytest.approx(0.5)
    assert points[5].compute_time == pytest.approx(0.3)


def test_network_bound_when_a_third_or_more_waits() -> None:
    splits = {
        0: metric_series.latest_split(derived(records(0, 0.12, 0.05))),
        1: metric_series.latest_split(derived(records(0, 0.12, 0.03))),
    }
    split = metric_series.step_split(splits)  # type: ignore[arg-type]
    assert split is not None and split.ranks == 2
    assert split.step_time == pytest.approx(0.12) and split.comm_time == pytest.approx(0.04)
    assert split.compute_time == pytest.approx(0.08) and split.bound == "network"
    calm = metric_series.step_split(
        {0: metric_series.latest_split(derived(records(0, 0.12, 0.01)))}
    )  # type: ignore[dict-item]
    assert calm is not None and calm.bound == "compute"


def test_no_comm_no_split_and_the_newest_attempt_counts() -> None:
    assert metric_series.latest_split(derived(records(0, 0.1, None))) is None
    assert metric_series.step_split({}) is None
    old = metric_series.latest_split(derived(records(0, 1.0, 0.9)))
    new = metric_series.latest_split(derived(records(1, 0.1, 0.01), attempt=1))
    split = metric_series.step_split({0: old, 1: new})  # type: ignore[dict-item]
    assert split is not None and split.ranks == 1 and split.step_time == pytest.approx(0.1)


def test_a_bad_comm_is_ignored_and_comm_never_exceeds_the_step() -> None:
    lines = [json.dumps({"step": k, "time": 1000 + k * 0.1, "comm": c}).encode()
             for k, c in enumerate([-1, "x", None, 5.0, 5.0])]  # fmt: skip
    raws = derived(lines)
    assert [r.comm for r in raws] == [None, None, None, 5.0, 5.0]
    split = metric_series.step_split({0: metric_series.latest_split(raws)})  # type: ignore[dict-item]
    assert split is not None and split.comm_time == split.step_time and split.compute_time == 0

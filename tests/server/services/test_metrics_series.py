"""services.metrics' reading of report() files (the math in ``metric_series``): derived
rates, bad lines, buckets."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from ringleader.server.services import metric_files, metric_series
from ringleader.server.services.metrics import READ_CAP


def _through_folder(path: Path, parse: metric_files.Parser) -> tuple[list[Any], bool]:
    """What the service reads of ``path``: through its directory's descriptor."""
    with metric_files.folder(str(path.parent)) as dir_fd:
        assert dir_fd is not None
        budget = metric_files.Budget()
        return metric_files.read(dir_fd, str(path.parent), path.name, parse, READ_CAP, budget)


def _read(path: Path, attempt: int) -> tuple[list[Any], bool]:
    return _through_folder(path, functools.partial(metric_series.parse, attempt=attempt))


def _read_resources(path: Path) -> list[Any]:
    return _through_folder(path, metric_series.parse_resources)[0]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_rates_from_consecutive_records_and_bad_lines_skipped(tmp_path: Path) -> None:
    records = [
        json.dumps({"step": 1, "time": 100.0, "loss": 2.0, "samples": 10}),
        "not json",
        json.dumps({"step": "2", "time": 101.0}),  # a step that is no int
        json.dumps({"step": 3, "time": 102.0, "loss": 1.0, "samples": 40, "scalars": {"lr": 1}}),
        '{"capped": true}',
        '{"step": 4, "ti',  # torn by a crash
    ]
    raw, capped = _read(_write(tmp_path / "rank-0.attempt-0.jsonl", records), 0)
    assert capped and [r.step for r in raw] == [1, 3]
    metric_series.derive(raw)
    assert raw[0].rate is None and raw[1].rate == 20.0 and raw[1].step_time == 1.0
    (first, second) = metric_series.downsample(raw, 10)
    assert first.loss == 2.0 and first.samples_per_second is None
    assert second.samples_per_second == 20.0 and second.scalars == {"lr": 1.0}


def test_buckets_bound_the_points_and_keep_the_last_step(tmp_path: Path) -> None:
    lines = [json.dumps({"step": s, "time": float(s), "samples": 2}) for s in range(1, 1001)]
    raw, _ = _read(_write(tmp_path / "f.jsonl", lines), 0)
    metric_series.derive(raw)
    points = metric_series.downsample(raw, 7)
    assert len(points) <= 7 and points[-1].step == 1000
    assert all(p.samples_per_second == 2.0 for p in points[1:])
    assert all(p.step_time == 1.0 for p in points[1:])


def test_a_link_is_not_followed(tmp_path: Path) -> None:
    """A workload's account could point its file at another workload's records."""
    other = _write(tmp_path / "other.jsonl", [json.dumps({"step": 1, "time": 1.0})])
    link = tmp_path / "rank-0.attempt-0.jsonl"
    link.symlink_to(other)
    assert _read(link, 0) == ([], False)


def test_pod_resources_bucketed_mean_cpu_max_memory(tmp_path: Path) -> None:
    """launch.podstats' samples: bad lines skipped, buckets of mean CPU and peak memory."""
    lines = [
        json.dumps({"time": float(t), "cpu": None if t == 0 else 1.0 + t % 2, "memoryBytes": t})
        for t in range(10)
    ]
    path = _write(tmp_path / "pod-a.resources.jsonl", [*lines, "oops", '{"time": "x"}', '{"ti'])
    points = _read_resources(path)
    assert [p.time for p in points] == [float(t) for t in range(10)] and points[0].cpu is None
    (first, second) = metric_series.bucket_resources(points, 2)
    assert first.time == 4.0 and first.cpu == 1.5 and first.memory_bytes == 4  # (2+1+2+1) / 4
    assert second.time == 9.0 and second.cpu == 1.6 and second.memory_bytes == 9
    assert metric_series.bucket_resources(points, 500) == points
    link = tmp_path / "pod-b.resources.jsonl"
    link.symlink_to(path)
    assert _read_resources(link) == []

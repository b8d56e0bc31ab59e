"""The series math of ``GET .../metrics``: records parsed, rates derived, points bucketed.

Split from ``metrics`` (which files a run's metrics are, reading them in the
reader process, the answer's shape: that module's docstring) so each file stays
one idea: here only pure functions of parsed lines, no file, session or backend,
and the point types they make.

Derived here, from consecutive records of one rank and attempt: step time
(seconds per step) and samples/s (the ``samples`` since the previous record
over the time between them).  A record's ``comm`` (``runtime.prepare``'s
timers: the seconds per step the rank waited for communication) splits the
step: compute = step time - communication; ``step_split`` says it for the
whole workload, from each rank's latest ``SPLIT_RECORDS`` records, and calls
the job network-bound when communication is ``NETWORK_BOUND_SHARE`` of the
step or more.  A series is bucketed to at most ``max_points`` points
(consecutive records merged: the last step, loss and scalars, the mean step
time, the bucket's samples over its time); a pod's CPU and memory samples too
(the mean CPU and the highest memory of each bucket, at its last sample's time).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from ringleader.server.schemas import Wire

SPLIT_RECORDS = 20
NETWORK_BOUND_SHARE = 1 / 3


class MetricPoint(Wire):
    attempt: int
    step: int
    time: float
    loss: float | None = None
    samples: int | None = None
    samples_per_second: float | None = None
    step_time: float | None = None
    comm_time: float | None = None  # seconds per step waiting on communication
    compute_time: float | None = None  # the rest of the step: step time - comm time
    scalars: dict[str, float] = Field(default_factory=dict)


class ResourcePoint(Wire):
    time: float
    cpu: float | None = None  # CPU cores used on average (1.5: one and a half)
    memory_bytes: int | None = None


class StepSplit(Wire):
    """Where a step's time goes, across ranks (their latest records' mean)."""

    step_time: float  # seconds per step
    compute_time: float  # forward, backward, optimizer, data: all but the wait below
    comm_time: float  # the communication a step waited for (not hidden by compute)
    bound: Literal["network", "compute"]
    ranks: int


@dataclass(slots=True)
class Raw:
    attempt: int
    step: int
    time: float
    loss: float | None
    samples: int | None
    scalars: dict[str, float]
    comm: float | None = None
    rate: float | None = None
    step_time: float | None = None
    dt: float | None = None


def parse(lines: list[bytes], attempt: int) -> tuple[list[Raw], bool]:
    """Well-formed records of a rank's lines (a stray line is skipped); True: capped."""
    records: list[Raw] = []
    capped = False
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        if item.get("capped") is True:
            capped = True
            continue
        step, moment = item.get("step"), item.get("time")
        if not isinstance(step, int) or not _finite(moment):
            continue
        loss = item.get("loss")
        comm = item.get("comm")
        samples = item.get("samples")
        scalars = item.get("scalars")
        records.append(
            Raw(
                attempt=attempt,
                step=step,
                time=float(moment),
                loss=float(loss) if _finite(loss) else None,
                comm=float(comm) if _finite(comm) and comm >= 0 else None,
                samples=samples if isinstance(samples, int) and samples >= 0 else None,
                scalars={
                    str(k): float(v) for k, v in scalars.items() if _finite(v) and len(k) <= 64
                }
                if isinstance(scalars, dict)
                else {},
            )
        )
    return records, capped


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def derive(records: list[Raw]) -> None:
    """Step time and samples/s from each record and the one before it (same attempt)."""
    for before, now in itertools.pairwise(records):
        dt = now.time - before.time
        if dt <= 0:
            continue
        now.dt = dt
        if now.step > before.step:
            now.step_time = dt / (now.step - before.step)
        if now.samples is not None:
            now.rate = now.samples / dt


def downsample(records: list[Raw], max_points: int) -> list[MetricPoint]:
    """At most ``max_points`` points: buckets of consecutive records of one attempt."""
    size = max(1, math.ceil(len(records) / max_points))
    points: list[MetricPoint] = []
    bucket: list[Raw] = []
    for record in records:
        if bucket and (len(bucket) == size or bucket[-1].attempt != record.attempt):
            points.append(_point(bucket))
            bucket = []
        bucket.append(record)
    if bucket:
        points.append(_point(bucket))
    if len(points) > max_points:  # attempts split buckets: keep the newest
        points = points[-max_points:]
    return points


def _point(bucket: list[Raw]) -> MetricPoint:
    last = bucket[-1]
    step_times = [r.step_time for r in bucket if r.step_time is not None]
    timed = [r for r in bucket if r.dt is not None and r.samples is not None]
    seconds = sum(r.dt or 0.0 for r in timed)
    counted = [r for r in bucket if r.samples is not None]
    comms = [r.comm for r in bucket if r.comm is not None]
    step_time = sum(step_times) / len(step_times) if step_times else None
    comm = sum(comms) / len(comms) if comms else None
    return MetricPoint(
        attempt=last.attempt,
        step=last.step,
        time=last.time,
        loss=last.loss,
        samples=sum(r.samples for r in counted) if counted else None,
        samples_per_second=sum(r.samples or 0 for r in timed) / seconds if seconds > 0 else None,
        step_time=step_time,
        comm_time=comm,
        compute_time=max(0.0, step_time - comm)
        if step_time is not None and comm is not None
        else None,
        scalars=last.scalars,
    )


def latest_split(records: list[Raw]) -> tuple[int, float, float] | None:
    """(attempt, step time, comm time) of the latest attempt's last timed records."""
    attempt = records[-1].attempt
    timed = [
        r
        for r in records[-SPLIT_RECORDS * 2 :]
        if r.attempt == attempt and r.comm is not None and r.step_time is not None
    ][-SPLIT_RECORDS:]
    if not timed:
        return None
    step = sum(r.step_time or 0.0 for r in timed) / len(timed)
    return attempt, step, sum(r.comm or 0.0 for r in timed) / len(timed)


def step_split(splits: dict[int, tuple[int, float, float]]) -> StepSplit | None:
    """The ranks' mean split (of the newest attempt); communication never exceeds the step."""
    newest = max((a for a, _, _ in splits.values()), default=None)
    chosen = [(step, comm) for a, step, comm in splits.values() if a == newest]
    if not chosen:
        return None
    step = sum(s for s, _ in chosen) / len(chosen)
    comm = min(step, sum(c for _, c in chosen) / len(chosen))
    network = step > 0 and comm >= NETWORK_BOUND_SHARE * step
    return StepSplit(
        step_time=step,
        compute_time=step - comm,
        comm_time=comm,
        bound="network" if network else "compute",
        ranks=len(chosen),
    )


def parse_resources(lines: list[bytes]) -> tuple[list[ResourcePoint], bool]:
    """A pod's well-formed samples (a stray line is skipped); never capped-flagged."""
    points: list[ResourcePoint] = []
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict) or not _finite(item.get("time")):
            continue
        cpu, memory = item.get("cpu"), item.get("memoryBytes")
        points.append(
            ResourcePoint(
                time=float(item["time"]),
                cpu=float(cpu) if _finite(cpu) and cpu >= 0 else None,
                memory_bytes=memory if isinstance(memory, int) and memory >= 0 else None,
            )
        )
    return points, False


def bucket_resources(points: list[ResourcePoint], max_points: int) -> list[ResourcePoint]:
    """At most ``max_points``: the mean CPU and the highest memory of consecutive samples."""
    size = max(1, math.ceil(len(points) / max_points))
    merged: list[ResourcePoint] = []
    for start in range(0, len(points), size):
        bucket = points[start : start + size]
        cpus = [p.cpu for p in bucket if p.cpu is not None]
        memories = [p.memory_bytes for p in bucket if p.memory_bytes is not None]
        merged.append(
            ResourcePoint(
                time=bucket[-1].time,
                cpu=round(sum(cpus) / len(cpus), 3) if cpus else None,
                memory_bytes=max(memories) if memories else None,
            )
        )
    return merged

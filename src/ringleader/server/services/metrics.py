"""A workload's training metrics, per pod and rank: what ``GET .../metrics`` returns.

The ranks write them with ``ringleader.runtime.report`` (format: that module's
docstring) into the run's metrics directory, ``RINGLEADER_METRICS_DIR`` in the
run's ``launch.json`` (set by the local backend's planning, never by a spec):
``rank-R.attempt-A.jsonl``.  Local, SSH and Slurm runs are read (an SSH
node's ranks write there only when the run dir is on a filesystem they share
with the server; Slurm's run dir is shared by design); other backends report
``collected: false``.

Derived here, from consecutive records of one rank and attempt: step time
(seconds per step) and samples/s (the ``samples`` since the previous record
over the time between them).  A record's ``comm`` (``runtime.prepare``'s
timers: the seconds per step the rank waited for communication) splits the
step: compute = step time - communication; ``stepSplit`` says it for the
whole workload, from each rank's latest ``SPLIT_RECORDS`` records, and calls
the job network-bound when communication is ``NETWORK_BOUND_SHARE`` of the
step or more.  Bounds: at most ``MAX_POINTS`` points per
series (consecutive records are merged into buckets: the last step, loss and
scalars, the mean step time, the bucket's samples over its time), at most
``READ_CAP`` bytes of a file (a rank's file is capped smaller by ``report``),
``since`` (a UNIX time) returns only later records, for cheap live updates.
The directory is the workload's own (its account's): how it is read (never
through a link, a FIFO or a hard link; at most ``metric_files.MAX_FILES`` files
and ``REQUEST_READ_CAP`` new bytes per request, the rest next time with
``partial`` set; parsed records cached so a poll reads only what is new) is
``metric_files``' docstring.

``resources``: CPU and memory per pod, sampled by the agent that owns the pod's
ranks (``launch.podstats``: its docstring says what and how often) into
``pod-<pod>.resources.jsonl`` in the same directory; only the launch's own pods
are looked for.  Bucketed the same way: the mean CPU and the highest memory of
each bucket, at its last sample's time; ``since`` and ``until`` cover them too.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field
from sqlalchemy.orm import Session

from ringleader.launch import podstats
from ringleader.launch.detached import load_launch
from ringleader.runtime.metrics import MAX_FILE_BYTES, METRICS_DIR
from ringleader.server.backends import BackendSet
from ringleader.server.backends.local.planning import LocalPod, pods_from_launch
from ringleader.server.models import User
from ringleader.server.schemas import Wire
from ringleader.server.services import metric_files, reader_process
from ringleader.server.services.workloads import get

MAX_POINTS = 500
READ_CAP = MAX_FILE_BYTES + 1024 * 1024
RESOURCES_READ_CAP = podstats.MAX_FILE_BYTES + 1024
SPLIT_RECORDS = 20
NETWORK_BOUND_SHARE = 1 / 3
_FILE = re.compile(r"rank-(\d{1,6})\.attempt-(\d{1,6})\.jsonl")


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


class RankSeries(Wire):
    pod: str
    rank: int
    points: list[MetricPoint]
    records: int  # after ``since``, before merging into ``points``
    capped: bool = False  # report() stopped writing: its file reached its size cap


class ResourcePoint(Wire):
    time: float
    cpu: float | None = None  # CPU cores used on average (1.5: one and a half)
    memory_bytes: int | None = None


class PodResources(Wire):
    pod: str
    node: str | None = None
    points: list[ResourcePoint]


class StepSplit(Wire):
    """Where a step's time goes, across ranks (their latest records' mean)."""

    step_time: float  # seconds per step
    compute_time: float  # forward, backward, optimizer, data: all but the wait below
    comm_time: float  # the communication a step waited for (not hidden by compute)
    bound: Literal["network", "compute"]
    ranks: int


class WorkloadMetrics(Wire):
    workload_id: str
    collected: bool  # False: this backend does not collect runtime.report's records
    series: list[RankSeries]
    resources: list[PodResources] = Field(default_factory=list)  # CPU and memory per pod
    total_samples_per_second: float | None = None  # the latest rate of every rank, summed
    step_split: StepSplit | None = None  # None: no rank's model was timed (runtime.prepare)
    until: float | None = None  # the latest record's time: the next call's ``since``
    partial: bool = False  # a cap left files or bytes unread: the next call reads on


@dataclass(slots=True)
class _Raw:
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


def workload_metrics(
    session: Session,
    user: User,
    workload_id: str,
    *,
    backends: BackendSet,
    since: float | None = None,
    max_points: int = MAX_POINTS,
) -> bytes:
    """Check the caller may see the workload (404 as for its logs), then read its files
    in the server's reader process (``reader_process``: parsing them here would hold
    the interpreter's lock every other request needs).  The answer is
    ``WorkloadMetrics``' JSON, by alias, ready to send."""
    workload = get(session, user, workload_id)
    wid, handle, backend_name = workload.id, workload.handle, workload.backend
    session.close()  # files are read with no transaction open
    if not handle:  # not admitted yet: nothing ran
        return _json(WorkloadMetrics(workload_id=wid, collected=True, series=[]))
    run_dir = backends.named(backend_name).run_dir_of(handle)
    if run_dir is None:
        return _json(WorkloadMetrics(workload_id=wid, collected=False, series=[]))
    with metric_files.turn():  # a few at once; one more is a 429, never a queue
        return reader_process.READER.call(
            "ringleader.server.services.metrics:read_run_metrics",
            str(run_dir),
            wid,
            since,
            max_points,
        )


def read_run_metrics(run_dir: str, wid: str, since: float | None, max_points: int) -> bytes:
    """In the reader process: the metrics of the run at ``run_dir`` as JSON."""
    empty = WorkloadMetrics(workload_id=wid, collected=True, series=[])
    launch = load_launch(Path(run_dir))
    folder = launch.spec.env.get(METRICS_DIR) if launch is not None else None
    if launch is None or not folder:
        return _json(empty)
    with metric_files.folder(folder) as dir_fd:
        if dir_fd is None:  # missing, or reached through a link: the workload's own doing
            return _json(empty)
        found = _collect(wid, folder, dir_fd, pods_from_launch(launch), since, max_points)
        return _json(found)


def _json(found: WorkloadMetrics) -> bytes:
    return found.model_dump_json(by_alias=True).encode()


def _collect(
    wid: str, folder: str, dir_fd: int, pods: list[LocalPod], since: float | None, max_points: int
) -> WorkloadMetrics:
    """The series and resources of the metrics directory open at ``dir_fd``."""
    budget = metric_files.Budget()
    owner = {r: p.name for p in pods for r in p.ranks}
    listed: list[tuple[int, int, str]] = []
    for name in metric_files.names(dir_fd, _is_rank_file, budget):
        match = _FILE.fullmatch(name)
        if match:
            listed.append((int(match.group(1)), int(match.group(2)), name))
    listed.sort()
    room = max(0, metric_files.MAX_FILES - len(pods))  # the pods' resources files count too
    if len(listed) > room:  # the lowest ranks' files are read, the rest not at all
        budget.partial, listed = True, listed[:room]
    files: dict[int, list[tuple[int, str]]] = {}
    for rank, attempt, name in listed:
        files.setdefault(rank, []).append((attempt, name))
    series: list[RankSeries] = []
    latest_rates: dict[int, tuple[int, float]] = {}
    splits: dict[int, tuple[int, float, float]] = {}  # rank -> (attempt, step, comm)
    until: float | None = None
    for rank in sorted(files):
        raw: list[_Raw] = []
        capped = False
        for attempt, name in sorted(files[rank]):
            parse = functools.partial(_parse, attempt=attempt)
            records, was_capped = metric_files.read(dir_fd, folder, name, parse, READ_CAP, budget)
            capped = capped or was_capped
            _derive(records)
            raw.extend(records)
        if raw:
            last = raw[-1]
            until = max(until or last.time, last.time)
            if last.rate is not None:
                latest_rates[rank] = (last.attempt, last.rate)
            if (split := _latest_split(raw)) is not None:
                splits[rank] = split
        fresh = [r for r in raw if since is None or r.time > since]
        if not fresh and since is not None:
            continue
        series.append(
            RankSeries(
                pod=owner.get(rank, f"rank-{rank}"),
                rank=rank,
                points=_downsample(fresh, max_points),
                records=len(fresh),
                capped=capped,
            )
        )
    resources: list[PodResources] = []
    for pod in pods:
        name = podstats.file_name(pod.name)
        found, _ = metric_files.read(
            dir_fd, folder, name, _parse_resources, RESOURCES_READ_CAP, budget
        )
        samples = sorted(found, key=lambda p: p.time)  # two agents' attempts may interleave
        if samples:
            until = max(until or samples[-1].time, samples[-1].time)
        fresh = [p for p in samples if since is None or p.time > since]
        if fresh:
            points = _bucket_resources(fresh, max_points)
            resources.append(PodResources(pod=pod.name, node=pod.node or None, points=points))
    newest = max((a for a, _ in latest_rates.values()), default=None)
    rates = [rate for a, rate in latest_rates.values() if a == newest]
    return WorkloadMetrics(
        workload_id=wid,
        collected=True,
        series=series,
        resources=resources,
        total_samples_per_second=sum(rates) if rates else None,
        step_split=_step_split(splits),
        until=until,
        partial=budget.partial,
    )


def _is_rank_file(name: str) -> bool:
    return _FILE.fullmatch(name) is not None


def _parse(lines: list[bytes], attempt: int) -> tuple[list[_Raw], bool]:
    """Well-formed records of a rank's lines (a stray line is skipped); True: capped."""
    records: list[_Raw] = []
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
            _Raw(
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


def _derive(records: list[_Raw]) -> None:
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


def _downsample(records: list[_Raw], max_points: int) -> list[MetricPoint]:
    """At most ``max_points`` points: buckets of consecutive records of one attempt."""
    size = max(1, math.ceil(len(records) / max_points))
    points: list[MetricPoint] = []
    bucket: list[_Raw] = []
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


def _point(bucket: list[_Raw]) -> MetricPoint:
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


def _latest_split(records: list[_Raw]) -> tuple[int, float, float] | None:
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


def _step_split(splits: dict[int, tuple[int, float, float]]) -> StepSplit | None:
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


def _parse_resources(lines: list[bytes]) -> tuple[list[ResourcePoint], bool]:
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


def _bucket_resources(points: list[ResourcePoint], max_points: int) -> list[ResourcePoint]:
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

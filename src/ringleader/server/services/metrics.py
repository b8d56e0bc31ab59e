"""A workload's training metrics, per pod and rank: what ``GET .../metrics`` returns.

The ranks write them with ``ringleader.runtime.report`` (format: that module's
docstring) into the run's metrics directory, ``RINGLEADER_METRICS_DIR`` in the
run's ``launch.json`` (set by the local backend's planning, never by a spec):
``rank-R.attempt-A.jsonl``.  Local, SSH and Slurm runs are read (an SSH
node's ranks write there only when the run dir is on a filesystem they share
with the server; Slurm's run dir is shared by design); other backends report
``collected: false``.

What is derived from the records (step time, samples/s, the step's split into
compute and communication: ``stepSplit``) and how a series is bucketed into
points is ``metric_series``' docstring.  Bounds: at most ``MAX_POINTS`` points
per series, at most ``READ_CAP`` bytes of a file (a rank's file is capped
smaller by ``report``), ``since`` (a UNIX time) returns only later records, for
cheap live updates.  The directory is the workload's own (its account's): how it
is read (never through a link, a FIFO or a hard link; at most
``metric_files.MAX_FILES`` files and ``REQUEST_READ_CAP`` new bytes per request,
the rest next time with ``partial`` set; parsed records cached so a poll reads
only what is new) is ``metric_files``' docstring.

``resources``: CPU and memory per pod, sampled by the agent that owns the pod's
ranks (``launch.podstats``: its docstring says what and how often) into
``pod-<pod>.resources.jsonl`` in the same directory; only the launch's own pods
are looked for.  Bucketed the same way: the mean CPU and the highest memory of
each bucket, at its last sample's time; ``since`` and ``until`` cover them too.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from pydantic import Field
from sqlalchemy.orm import Session

from ringleader.launch import podstats
from ringleader.launch.detached import load_launch
from ringleader.runtime.metrics import MAX_FILE_BYTES, METRICS_DIR
from ringleader.server.backends import BackendSet
from ringleader.server.backends.local.planning import LocalPod, pods_from_launch
from ringleader.server.models import User
from ringleader.server.schemas import Wire
from ringleader.server.services import metric_files, metric_series, reader_process
from ringleader.server.services.metric_series import MetricPoint, Raw, ResourcePoint, StepSplit
from ringleader.server.services.workloads import get

MAX_POINTS = 500
READ_CAP = MAX_FILE_BYTES + 1024 * 1024
RESOURCES_READ_CAP = podstats.MAX_FILE_BYTES + 1024
_FILE = re.compile(r"rank-(\d{1,6})\.attempt-(\d{1,6})\.jsonl")


class RankSeries(Wire):
    pod: str
    rank: int
    points: list[MetricPoint]
    records: int  # after ``since``, before merging into ``points``
    capped: bool = False  # report() stopped writing: its file reached its size cap


class PodResources(Wire):
    pod: str
    node: str | None = None
    points: list[ResourcePoint]


class WorkloadMetrics(Wire):
    workload_id: str
    collected: bool  # False: this backend does not collect runtime.report's records
    series: list[RankSeries]
    resources: list[PodResources] = Field(default_factory=list)  # CPU and memory per pod
    total_samples_per_second: float | None = None  # the latest rate of every rank, summed
    step_split: StepSplit | None = None  # None: no rank's model was timed (runtime.prepare)
    until: float | None = None  # the latest record's time: the next call's ``since``
    partial: bool = False  # a cap left files or bytes unread: the next call reads on


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
        raw: list[Raw] = []
        capped = False
        for attempt, name in sorted(files[rank]):
            parse = functools.partial(metric_series.parse, attempt=attempt)
            records, was_capped = metric_files.read(dir_fd, folder, name, parse, READ_CAP, budget)
            capped = capped or was_capped
            metric_series.derive(records)
            raw.extend(records)
        if raw:
            last = raw[-1]
            until = max(until or last.time, last.time)
            if last.rate is not None:
                latest_rates[rank] = (last.attempt, last.rate)
            if (split := metric_series.latest_split(raw)) is not None:
                splits[rank] = split
        fresh = [r for r in raw if since is None or r.time > since]
        if not fresh and since is not None:
            continue
        series.append(
            RankSeries(
                pod=owner.get(rank, f"rank-{rank}"),
                rank=rank,
                points=metric_series.downsample(fresh, max_points),
                records=len(fresh),
                capped=capped,
            )
        )
    resources: list[PodResources] = []
    for pod in pods:
        name = podstats.file_name(pod.name)
        found, _ = metric_files.read(
            dir_fd, folder, name, metric_series.parse_resources, RESOURCES_READ_CAP, budget
        )
        samples = sorted(found, key=lambda p: p.time)  # two agents' attempts may interleave
        if samples:
            until = max(until or samples[-1].time, samples[-1].time)
        fresh = [p for p in samples if since is None or p.time > since]
        if fresh:
            points = metric_series.bucket_resources(fresh, max_points)
            resources.append(PodResources(pod=pod.name, node=pod.node or None, points=points))
    newest = max((a for a, _ in latest_rates.values()), default=None)
    rates = [rate for a, rate in latest_rates.values() if a == newest]
    return WorkloadMetrics(
        workload_id=wid,
        collected=True,
        series=series,
        resources=resources,
        total_samples_per_second=sum(rates) if rates else None,
        step_split=metric_series.step_split(splits),
        until=until,
        partial=budget.partial,
    )


def _is_rank_file(name: str) -> bool:
    return _FILE.fullmatch(name) is not None

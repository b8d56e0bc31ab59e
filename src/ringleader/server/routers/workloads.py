"""Workload routes, shaped like Run:ai's: thin — parse, call a service, commit."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from datetime import datetime

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse, StreamingResponse
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ringleader.errors import InvalidSpec
from ringleader.server.backends.base import LogLine
from ringleader.server.deps import current_user, get_session
from ringleader.server.models import Event, Project, User, Workload
from ringleader.server.schemas import (
    Accepted,
    EventOut,
    PodOut,
    WorkloadCount,
    WorkloadList,
    WorkloadOut,
)
from ringleader.server.services import workloads as svc
from ringleader.spec import WorkloadSpec

router = APIRouter(prefix="/api/v1/workloads", tags=["workloads"])
_DURATION = re.compile(r"^(\d+)([smhd])$")


def _out(s: Session, w: Workload, names: dict[str, str] | None = None) -> WorkloadOut:
    """The wire form; ``names`` (id -> name of projects and users) saves a query per row."""
    names = names if names is not None else _names(s, [w])
    out = svc.to_out(w, names.get(w.project_id, w.project_id))
    return out.model_copy(update={"created_by": names.get(w.created_by or "")})


def _names(s: Session, rows: list[Workload]) -> dict[str, str]:
    """Project and creator names of ``rows``, in two queries whatever their number."""
    projects = {w.project_id for w in rows}
    users = {w.created_by for w in rows if w.created_by}
    names = dict(s.execute(select(Project.id, Project.name).where(Project.id.in_(projects))).all())
    if users:
        names |= dict(s.execute(select(User.id, User.name).where(User.id.in_(users))).all())
    return names


def _accepted(w: Workload) -> Accepted:
    return Accepted(
        workload_id=w.id, name=w.name, desired_phase=w.desired_phase, actual_phase=w.phase
    )


@router.post("/distributed", status_code=202, response_model=Accepted, response_model_by_alias=True)
def submit(
    body: WorkloadSpec,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Accepted:
    workload = svc.submit(
        s, user, body, container_runtime=request.app.state.backend.capabilities.container_images
    )
    try:
        s.commit()
    except IntegrityError:
        s.rollback()
        conflict = svc.name_taken(s, workload)
        if conflict is not None:
            raise conflict from None
        raise
    request.app.state.background.wake()
    return _accepted(workload)


@router.get("/count", response_model=WorkloadCount)
def count(
    filter_by: list[str] = Query(default=[], alias="filterBy"),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> WorkloadCount:
    return WorkloadCount(count=svc.list_workloads(s, user, filters=filter_by, limit=1)[1])


@router.get("/distributed/{workload_id}", response_model=WorkloadOut, response_model_by_alias=True)
@router.get("/{workload_id}", response_model=WorkloadOut, response_model_by_alias=True)
def get(
    workload_id: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> WorkloadOut:
    return _out(s, svc.get(s, user, workload_id))


def _record_intent(
    workload_id: str,
    request: Request,
    user: User,
    s: Session,
    change: Callable[[Session, Workload], None],
) -> Accepted:
    """Record what the user wants, commit, and wake the loops that act on it."""
    workload = svc.get(s, user, workload_id)
    change(s, workload)
    s.commit()
    request.app.state.background.wake()
    return _accepted(workload)


_ACCEPTED = {"status_code": 202, "response_model": Accepted, "response_model_by_alias": True}


@router.delete("/distributed/{workload_id}", **_ACCEPTED)
def delete(
    workload_id: str,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Accepted:
    return _record_intent(workload_id, request, user, s, svc.request_delete)


@router.post("/distributed/{workload_id}/suspend", **_ACCEPTED)
def suspend(
    workload_id: str,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Accepted:
    return _record_intent(workload_id, request, user, s, svc.request_suspend)


@router.post("/distributed/{workload_id}/resume", **_ACCEPTED)
def resume(
    workload_id: str,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Accepted:
    return _record_intent(workload_id, request, user, s, svc.request_resume)


@router.get("", response_model=WorkloadList, response_model_by_alias=True)
def list_all(
    filter_by: list[str] = Query(default=[], alias="filterBy"),
    sort_by: str = Query("createdAt", alias="sortBy"),
    sort_order: str = Query("desc", alias="sortOrder"),
    offset: int = Query(0, ge=0, le=svc.MAX_OFFSET),
    limit: int = Query(50, ge=1, le=500),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> WorkloadList:
    rows, total = svc.list_workloads(
        s,
        user,
        filters=filter_by,
        sort_by=sort_by,
        sort_order=sort_order,
        offset=offset,
        limit=limit,
    )
    names = _names(s, rows)
    return WorkloadList(
        workloads=[_out(s, w, names) for w in rows], total=total, offset=offset, limit=limit
    )


@router.get("/{workload_id}/pods", response_model=list[PodOut], response_model_by_alias=True)
def pods(
    workload_id: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> list[PodOut]:
    workload = svc.get(s, user, workload_id)
    return [
        PodOut(
            name=p.name,
            role=p.role,
            index=p.index,
            node=p.node,
            status=p.phase,
            exit_code=p.exit_code,
            attempt=p.attempt,
            ranks=list(p.ranks or []),
            gpus=list(p.gpus or []),
            started_at=p.started_at,
            completed_at=p.completed_at,
        )
        for p in sorted(
            workload.pods, key=lambda p: (p.role != "master" and p.role != "launcher", p.index)
        )
    ]


@router.get("/{workload_id}/events", response_model=list[EventOut], response_model_by_alias=True)
def events(
    workload_id: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> list[EventOut]:
    workload = svc.get(s, user, workload_id)
    rows = s.scalars(select(Event).where(Event.workload_id == workload.id).order_by(Event.id))
    return [
        EventOut(
            id=e.id,
            time=e.time,
            type=e.type,
            pod_name=e.pod_name,
            from_phase=e.from_phase,
            to_phase=e.to_phase,
            reason=e.reason,
            message=e.message,
        )
        for e in rows
    ]


def _since(value: str | None) -> float | None:
    if not value:
        return None
    match = _DURATION.match(value)
    if match:
        ago = int(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
        now = time.time()
        return now - min(ago, now)  # before the epoch is all of it (and no float overflow)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidSpec("expected a duration like 5m, 2h or an ISO time", "since") from None
    try:
        return moment.timestamp()
    except (OverflowError, ValueError):  # at the edge of datetime's range (year 1 or 9999)
        return 0.0 if moment.year < 1970 else float("inf")


def _format(line: LogLine, timestamps: bool) -> str:
    stamp = ""
    if timestamps and line.time is not None:
        stamp = (
            datetime.fromtimestamp(line.time).astimezone().isoformat(timespec="milliseconds") + " "
        )
    return f"{stamp}[{line.pod}] {line.text}\n"


@router.get("/{workload_id}/logs", response_class=PlainTextResponse)
def logs(
    workload_id: str,
    request: Request,
    pod: str | None = None,
    tail: int | None = Query(None, ge=1),
    since: str | None = None,
    follow: bool = False,
    timestamps: bool = False,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> StreamingResponse:
    workload = svc.get(s, user, workload_id)
    state = {"handle": workload.handle}
    wid = workload.id
    if pod is not None:
        names = {p.name for p in workload.pods}
        pod = pod if pod in names else f"{workload.name}-{pod}"
        if pod not in names:
            raise InvalidSpec(
                f"no such pod in workload {workload.name!r}; pods: {sorted(names)}", "pod"
            )
    backend, sessions = request.app.state.backend, request.app.state.readers
    after = _since(since)
    s.close()  # no transaction stays open while streaming

    def fetch(seen: dict[tuple[str, int, str], int]) -> list[LogLine]:
        """Lines not yet sent: per (pod, attempt, stream) the files only grow."""
        fresh: list[LogLine] = []
        counts: dict[tuple[str, int, str], int] = {}
        handle = state["handle"]
        for ln in backend.logs(handle, pod=pod) if handle else []:
            if after is not None and ln.time is not None and ln.time < after:
                continue
            key = (ln.pod, ln.attempt, ln.stream)
            counts[key] = counts.get(key, 0) + 1
            if counts[key] > seen.get(key, 0):
                fresh.append(ln)
        seen.update(counts)
        return fresh

    def finished() -> bool:
        """True once the workload ended; picks up the handle once it is admitted."""
        with sessions() as s2:
            current = s2.get(Workload, wid)
            if current is None:
                return True
            state["handle"] = state["handle"] or current.handle
            return current.phase in (*svc.FINAL, "Deleted")

    def stream() -> Iterator[str]:
        seen: dict[tuple[str, int, str], int] = {}
        first = fetch(seen)
        for ln in first[-tail:] if tail else first:
            yield _format(ln, timestamps)
        while follow:
            done = finished()  # read before fetching, so the last lines are never missed
            for ln in fetch(seen):
                yield _format(ln, timestamps)
            if done:
                return
            time.sleep(0.3)

    return StreamingResponse(stream(), media_type="text/plain")

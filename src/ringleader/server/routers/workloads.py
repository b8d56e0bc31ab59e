"""Workload routes, shaped like Run:ai's: parse, call one service, return.

What a route returns is built by ``services.views`` (reads) or by the write
services (``services.workloads``), which commit; a route that recorded an
intent then wakes the background work that acts on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from sqlalchemy.orm import Session
from starlette.types import Receive, Scope, Send

from ringleader.server.deps import Verified, current_user, get_session, verified_caller
from ringleader.server.models import User
from ringleader.server.routers.clusters import this_cluster_id
from ringleader.server.schemas import (
    Accepted,
    EventList,
    PodList,
    WorkloadCount,
    WorkloadList,
    WorkloadOut,
)
from ringleader.server.services import group_commit, idempotency, views
from ringleader.server.services import workload_intents as intents
from ringleader.server.services import workloads as svc
from ringleader.server.services.logs import log_text
from ringleader.server.services.metrics import MAX_POINTS, WorkloadMetrics, workload_metrics
from ringleader.server.services.workload_list import MAX_OFFSET
from ringleader.spec import WorkloadSpec

router = APIRouter(prefix="/api/v1/workloads", tags=["workloads"])


@router.post("/distributed", status_code=202, response_model=Accepted, response_model_by_alias=True)
async def submit(
    body: WorkloadSpec,
    request: Request,
    idempotency_key: str | None = Header(
        default=None,
        alias=idempotency.HEADER,
        description="Sent again with the same body (a retry), the submission answers as "
        "the first did and makes no second workload; another body with it is a 422.",
    ),
    who: Verified = Depends(verified_caller),
) -> Accepted:
    # The group commit's writer thread does the work (services/group_commit.py): the
    # submissions that wait at once share a transaction; this waits on the loop.
    state = request.app.state
    key = idempotency.checked_key(idempotency_key)

    def work(s: Session, isolated: bool) -> Accepted:
        user = who.attach(s)
        return svc.accept_in(
            s,
            user,
            body,
            backends=state.backends,
            cluster=state.cluster,
            idempotency_key=key,
            isolated=isolated,
        )

    accepted = await group_commit.of(state).submit(work)
    state.background.submitted()
    return accepted


@router.get("/count", response_model=WorkloadCount)
def count(
    filter_by: list[str] = Query(default=[], alias="filterBy"),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> WorkloadCount:
    return views.workload_count(s, user, filter_by)


@router.get("/distributed/{workload_id}", response_model=WorkloadOut, response_model_by_alias=True)
@router.get("/{workload_id}", response_model=WorkloadOut, response_model_by_alias=True)
def get(
    workload_id: str,
    cluster_id: str = Depends(this_cluster_id),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> WorkloadOut:
    """Run:ai's ``Workload`` (``id``, ``phase`` ...) with ringleader's fields
    (``workloadId``, ``actualPhase`` ...), on both paths."""
    return views.workload(s, user, workload_id, cluster_id=cluster_id)


_ACCEPTED = {"status_code": 202, "response_model": Accepted, "response_model_by_alias": True}


def _record(request: Request, s: Session, user: User, workload_id: str, name: str) -> Accepted:
    """Record intent ``name`` (``intents.INTENTS``) and wake the loops that act on it."""
    accepted = svc.record_intent(
        s, user, workload_id, intents.intent(name, request.app.state.backends)
    )
    request.app.state.background.intent_recorded()
    return accepted


@router.delete("/distributed/{workload_id}", **_ACCEPTED)
def delete(
    workload_id: str,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Accepted:
    return _record(request, s, user, workload_id, "delete")


@router.post("/distributed/{workload_id}/suspend", **_ACCEPTED)
def suspend(
    workload_id: str,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Accepted:
    return _record(request, s, user, workload_id, "suspend")


@router.post("/distributed/{workload_id}/resume", **_ACCEPTED)
def resume(
    workload_id: str,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Accepted:
    return _record(request, s, user, workload_id, "resume")


@router.get("", response_model=WorkloadList, response_model_by_alias=True)
def list_all(
    filter_by: list[str] = Query(default=[], alias="filterBy"),
    sort_by: str = Query("createdAt", alias="sortBy"),
    sort_order: str = Query("desc", alias="sortOrder"),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
    limit: int = Query(50, ge=1, le=500),
    view: Literal["summary", "full"] = Query(
        "summary", description="summary: specs without command, args and variables"
    ),
    search: str | None = Query(
        None, max_length=255, description="Run:ai's free-text search: names containing it"
    ),
    cluster_id: str = Depends(this_cluster_id),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> WorkloadList:
    """Run:ai's wrapped list: ``{"workloads": [...], "next": N}`` (and the total)."""
    if search:
        filter_by = [*filter_by, f"name=@{search}"]
    return views.workloads(
        s,
        user,
        filters=filter_by,
        sort_by=sort_by,
        sort_order=sort_order,
        offset=offset,
        limit=limit,
        view=view,
        cluster_id=cluster_id,
    )


@router.get("/{workload_id}/pods", response_model=PodList, response_model_by_alias=True)
def pods(
    workload_id: str,
    cluster_id: str = Depends(this_cluster_id),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> PodList:
    """Run:ai's wrapped list: ``{"pods": [...]}``, the master or launcher first."""
    return PodList(pods=views.pods(s, user, workload_id, cluster_id=cluster_id))


@router.get("/{workload_id}/events", response_model=EventList, response_model_by_alias=True)
def events(
    workload_id: str,
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
    limit: int | None = Query(None, ge=1, le=10_000),
    sort_order: Literal["asc", "desc"] = Query("asc", alias="sortOrder"),
    cluster_id: str = Depends(this_cluster_id),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> EventList:
    """Run:ai's wrapped list: ``{"events": [...], "next": N}``; oldest first unless
    ``sortOrder=desc`` (Run:ai's default is desc); every event unless ``limit``."""
    page = views.events(
        s,
        user,
        workload_id,
        cluster_id=cluster_id,
        offset=offset,
        limit=None if limit is None else limit + 1,  # one more: is there a next page?
        newest_first=sort_order == "desc",
    )
    more = limit is not None and len(page) > limit
    return EventList(events=page[:limit], next=offset + limit if more and limit else None)


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
    """The lines as text; ``follow`` streams until the workload ends (at most
    ``--max-follows-per-user`` at once per user: 429 past it)."""
    state = request.app.state
    release = state.follows.take(user.id) if follow else _nothing
    try:
        lines = log_text(
            s,
            user,
            workload_id,
            backends=state.backends,
            readers=state.readers,
            pod=pod,
            tail=tail,
            since=since,
            follow=follow,
            timestamps=timestamps,
            stopping=state.stopping,
            threads=state.follows.threads,
        )
    except BaseException:
        release()
        raise
    return _Stream(lines, release)


def _nothing() -> None:
    """What a read without follow gives back: no slot."""


class _Stream(StreamingResponse):
    """The lines' response, which gives its follow slot back however it ends (the
    client went away, the workload ended, the server stops)."""

    def __init__(self, lines: Iterator[str] | AsyncIterator[str], release: Callable[[], None]):
        super().__init__(lines, media_type="text/plain")
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


@router.get("/{workload_id}/metrics", response_model=WorkloadMetrics, response_model_by_alias=True)
def metrics(
    workload_id: str,
    request: Request,
    since: float | None = Query(None, ge=0, le=1e11),
    max_points: int = Query(MAX_POINTS, alias="maxPoints", ge=2, le=MAX_POINTS),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Response:
    """What the ranks reported with ``runtime.report``, per pod and rank (ringleader's own
    route, not Run:ai's); ``since`` (a UNIX time, the last answer's ``until``) returns
    only newer records, for live charts."""
    found = workload_metrics(
        s,
        user,
        workload_id,
        backends=request.app.state.backends,
        since=since,
        max_points=max_points,
    )
    return Response(found, media_type="application/json")  # WorkloadMetrics' JSON

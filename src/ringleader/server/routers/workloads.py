"""Workload routes, shaped like Run:ai's: parse, call one service, return.

What a route returns is built by ``services.views`` (reads) or by the write
services (``services.workloads``), which commit; a route that recorded an
intent then wakes the background work that acts on it.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse, StreamingResponse
from sqlalchemy.orm import Session

from ringleader.server.deps import current_user, get_session
from ringleader.server.models import User
from ringleader.server.schemas import (
    Accepted,
    EventOut,
    PodOut,
    WorkloadCount,
    WorkloadList,
    WorkloadOut,
)
from ringleader.server.services import views
from ringleader.server.services import workloads as svc
from ringleader.server.services.logs import log_text
from ringleader.spec import WorkloadSpec

router = APIRouter(prefix="/api/v1/workloads", tags=["workloads"])


@router.post("/distributed", status_code=202, response_model=Accepted, response_model_by_alias=True)
def submit(
    body: WorkloadSpec,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Accepted:
    state = request.app.state
    accepted = svc.accept(s, user, body, backends=state.backends)
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
    workload_id: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> WorkloadOut:
    return views.workload(s, user, workload_id)


_ACCEPTED = {"status_code": 202, "response_model": Accepted, "response_model_by_alias": True}


@router.delete("/distributed/{workload_id}", **_ACCEPTED)
def delete(
    workload_id: str,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Accepted:
    accepted = svc.record_intent(s, user, workload_id, svc.request_delete)
    request.app.state.background.intent_recorded()
    return accepted


@router.post("/distributed/{workload_id}/suspend", **_ACCEPTED)
def suspend(
    workload_id: str,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Accepted:
    accepted = svc.record_intent(s, user, workload_id, svc.suspender(request.app.state.backends))
    request.app.state.background.intent_recorded()
    return accepted


@router.post("/distributed/{workload_id}/resume", **_ACCEPTED)
def resume(
    workload_id: str,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Accepted:
    accepted = svc.record_intent(s, user, workload_id, svc.request_resume)
    request.app.state.background.intent_recorded()
    return accepted


@router.get("", response_model=WorkloadList, response_model_by_alias=True)
def list_all(
    filter_by: list[str] = Query(default=[], alias="filterBy"),
    sort_by: str = Query("createdAt", alias="sortBy"),
    sort_order: str = Query("desc", alias="sortOrder"),
    offset: int = Query(0, ge=0, le=svc.MAX_OFFSET),
    limit: int = Query(50, ge=1, le=500),
    view: Literal["summary", "full"] = Query(
        "summary", description="summary: specs without command, args and variables"
    ),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> WorkloadList:
    return views.workloads(
        s,
        user,
        filters=filter_by,
        sort_by=sort_by,
        sort_order=sort_order,
        offset=offset,
        limit=limit,
        view=view,
    )


@router.get("/{workload_id}/pods", response_model=list[PodOut], response_model_by_alias=True)
def pods(
    workload_id: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> list[PodOut]:
    return views.pods(s, user, workload_id)


@router.get("/{workload_id}/events", response_model=list[EventOut], response_model_by_alias=True)
def events(
    workload_id: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> list[EventOut]:
    return views.events(s, user, workload_id)


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
    lines = log_text(
        s,
        user,
        workload_id,
        backends=request.app.state.backends,
        readers=request.app.state.readers,
        pod=pod,
        tail=tail,
        since=since,
        follow=follow,
        timestamps=timestamps,
        stopping=request.app.state.stopping,
    )
    return StreamingResponse(lines, media_type="text/plain")

"""/api/v1/org-unit/projects: create, list, get, update (quotas), delete; members and roles."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Response
from sqlalchemy.orm import Session

from ringleader.server.deps import current_user, get_session
from ringleader.server.models import User
from ringleader.server.routers.clusters import this_cluster_id
from ringleader.server.schemas import (
    MemberIn,
    MemberOut,
    ProjectIn,
    ProjectList,
    ProjectOut,
    ProjectUpdate,
)
from ringleader.server.services import projects, views
from ringleader.server.services.workload_list import MAX_OFFSET

router = APIRouter(prefix="/api/v1/org-unit/projects", tags=["projects"])


@router.post("", status_code=201, response_model=ProjectOut, response_model_by_alias=True)
def create(
    body: ProjectIn,
    cluster_id: str = Depends(this_cluster_id),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> ProjectOut:
    return projects.create(s, user, body).model_copy(update={"cluster_id": cluster_id})


@router.get("", response_model=ProjectList, response_model_by_alias=True)
def list_all(
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
    limit: int | None = Query(None, ge=1, le=10_000),
    cluster_id: str = Depends(this_cluster_id),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> ProjectList:
    """Run:ai's wrapped list: ``{"projects": [...], "next": N}``, by name; every
    project the caller may use unless ``limit``."""
    page = views.projects(
        s,
        user,
        cluster_id=cluster_id,
        offset=offset,
        limit=None if limit is None else limit + 1,  # one more: is there a next page?
    )
    more = limit is not None and len(page) > limit
    return ProjectList(projects=page[:limit], next=offset + limit if more and limit else None)


@router.get("/{key}", response_model=ProjectOut, response_model_by_alias=True)
def get(
    key: str,
    cluster_id: str = Depends(this_cluster_id),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> ProjectOut:
    return views.project(s, user, key, cluster_id=cluster_id)


@router.put("/{key}", response_model=ProjectOut, response_model_by_alias=True)
def update(
    key: str,
    body: ProjectUpdate,
    cluster_id: str = Depends(this_cluster_id),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> ProjectOut:
    changed = projects.update(s, user, key, body.resources)
    return changed.model_copy(update={"cluster_id": cluster_id})


@router.delete("/{key}", status_code=204)
def delete(
    key: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> Response:
    projects.delete(s, user, key)
    return Response(status_code=204)


@router.get("/{key}/members", response_model=list[MemberOut], response_model_by_alias=True)
def members(
    key: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> list[MemberOut]:
    return projects.members(s, user, key)


@router.put("/{key}/members/{member}", response_model=MemberOut, response_model_by_alias=True)
def set_member(
    key: str,
    member: str,
    body: MemberIn,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> MemberOut:
    """Add a user (id or username) to the project with a role, or change its role."""
    return projects.set_member(s, user, key, member, body.role)


@router.delete("/{key}/members/{member}", status_code=204)
def remove_member(
    key: str, member: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> Response:
    projects.remove_member(s, user, key, member)
    return Response(status_code=204)

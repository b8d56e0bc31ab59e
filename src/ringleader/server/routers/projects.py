"""/api/v1/org-unit/projects: create, list, get, update (quotas), delete; members and roles."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from sqlalchemy.orm import Session

from ringleader.server.deps import current_user, get_session
from ringleader.server.models import User
from ringleader.server.schemas import MemberIn, MemberOut, ProjectIn, ProjectOut, ProjectUpdate
from ringleader.server.services import projects, views

router = APIRouter(prefix="/api/v1/org-unit/projects", tags=["projects"])


@router.post("", status_code=201, response_model=ProjectOut, response_model_by_alias=True)
def create(
    body: ProjectIn, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> ProjectOut:
    return projects.create(s, user, body)


@router.get("", response_model=list[ProjectOut], response_model_by_alias=True)
def list_all(
    user: User = Depends(current_user), s: Session = Depends(get_session)
) -> list[ProjectOut]:
    return views.projects(s, user)


@router.get("/{key}", response_model=ProjectOut, response_model_by_alias=True)
def get(
    key: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> ProjectOut:
    return views.project(s, user, key)


@router.put("/{key}", response_model=ProjectOut, response_model_by_alias=True)
def update(
    key: str,
    body: ProjectUpdate,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> ProjectOut:
    return projects.update(s, user, key, body.resources)


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

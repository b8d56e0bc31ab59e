"""/api/v1/org-unit/projects: create, list, get, update (quotas), delete."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from sqlalchemy.orm import Session

from ringleader.server.deps import current_user, get_session
from ringleader.server.models import User
from ringleader.server.schemas import ProjectIn, ProjectOut, ProjectUpdate
from ringleader.server.services import projects
from ringleader.server.services.workloads import resolve_project

router = APIRouter(prefix="/api/v1/org-unit/projects", tags=["projects"])


@router.post("", status_code=201, response_model=ProjectOut, response_model_by_alias=True)
def create(
    body: ProjectIn, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> ProjectOut:
    project = projects.create(s, user, body)
    s.commit()
    return projects.to_out(project)


@router.get("", response_model=list[ProjectOut], response_model_by_alias=True)
def list_all(
    user: User = Depends(current_user), s: Session = Depends(get_session)
) -> list[ProjectOut]:
    return [projects.to_out(p) for p in projects.list_projects(s, user)]


@router.get("/{key}", response_model=ProjectOut, response_model_by_alias=True)
def get(
    key: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> ProjectOut:
    return projects.to_out(resolve_project(s, user, key))


@router.put("/{key}", response_model=ProjectOut, response_model_by_alias=True)
def update(
    key: str,
    body: ProjectUpdate,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> ProjectOut:
    project = projects.update(s, user, key, body.resources)
    s.commit()
    return projects.to_out(project)


@router.delete("/{key}", status_code=204)
def delete(
    key: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> Response:
    projects.delete(s, user, key)
    s.commit()
    return Response(status_code=204)

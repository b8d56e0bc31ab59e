"""One user's admin page: its projects and roles, its access keys (list,
create with the secret shown once, revoke) and deleting it.

The rules are the API's (services/users.py, services/projects.py): key names
unique per user and at most ``users.MAX_KEYS``, the last admin stays, nobody
deletes themselves. Creating a key for another user is the admin's power
that ``POST /api/v1/users`` already uses for a new user's first key.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.errors import Conflict, NotFound
from ringleader.server.auth import token_digest
from ringleader.server.deps import get_session
from ringleader.server.models import AccessKey, Project, Token, User
from ringleader.server.schemas import AccessKeyIn
from ringleader.server.services import projects, users
from ringleader.server.services.workloads import findable
from ringleader.server.ui.admin_common import (
    ROLES,
    admin_form,
    admin_user,
    field,
    project_names,
    pydantic_errors,
    runs_as,
)
from ringleader.server.ui.render import page
from ringleader.server.ui.session import session_token, set_notice
from ringleader.server.ui.wizard_form import friendly

router = APIRouter(include_in_schema=False)


def user_page(
    request: Request,
    s: Session,
    admin: User,
    key: str,
    *,
    problem: str | None = None,
    errors: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    target = users.get(s, admin, key)
    member_of = {m.project_id for m in target.projects}
    joinable = [(i, n) for i, n in project_names(s) if i not in member_of]
    return page(
        request,
        "admin_user.html",
        admin,
        status_code=status_code,
        title=f"User {target.username}",
        target=target,
        runs_as=runs_as(request.app.state.config, target),
        keys=users.list_keys(s, s.get(User, target.id)).access_keys,  # type: ignore[arg-type]
        own_key=_own_key(s, request),
        joinable=joinable,
        roles=ROLES,
        max_keys=users.MAX_KEYS,
        problem=friendly(problem) if problem else None,
        errors=errors or {},
        values=values or {},
    )


def _own_key(s: Session, request: Request) -> str | None:
    """The access key this session was issued for (revoking it logs the admin out)."""
    token = session_token(request)
    if not token:
        return None
    return s.scalar(select(Token.access_key_id).where(Token.token_hash == token_digest(token)))


@router.get("/admin/users/{key}", response_class=HTMLResponse)
def show_user(
    key: str, request: Request, admin: User = Depends(admin_user), s: Session = Depends(get_session)
) -> HTMLResponse:
    return user_page(request, s, admin, key)


@router.post("/admin/users/{key}/delete", response_model=None)
def delete_user(
    key: str, request: Request, admin: User = Depends(admin_form), s: Session = Depends(get_session)
) -> Response:
    target = users.find_user(s, key)
    name = target.name
    try:
        users.remove(s, admin, target.id)
    except Conflict as exc:
        s.rollback()
        return user_page(request, s, admin, target.id, problem=str(exc), status_code=409)
    response = RedirectResponse("/admin/users", status_code=303)
    set_notice(response, request, f"User {name} deleted, with its access keys.")
    return response


@router.post("/admin/users/{key}/keys", response_class=HTMLResponse)
async def create_key(
    key: str, request: Request, admin: User = Depends(admin_form), s: Session = Depends(get_session)
) -> HTMLResponse:
    target = users.find_user(s, key)
    form = await request.form()
    errors: dict[str, str] = {}
    name = field(form, "name", errors)
    body = None
    try:
        body = AccessKeyIn.model_validate({"name": name})
    except ValidationError as exc:
        errors = pydantic_errors(exc, {}) | errors
    names = list(s.scalars(select(AccessKey.name).where(AccessKey.user_id == target.id)))
    if body is not None and body.name in names:
        errors["name"] = f"{target.name} already has an access key named {body.name!r}"
    elif len(names) >= users.MAX_KEYS:
        errors["name"] = f"{target.name} has {len(names)} access keys, the most; revoke one first"
    if errors or body is None:
        return user_page(
            request, s, admin, target.id, errors=errors, values={"name": name}, status_code=400
        )
    created = users.create_key(s, target, body)  # the same checks as POST /api/v1/access-keys
    return page(
        request,
        "admin_secret.html",
        admin,
        status_code=201,
        title="Access key created",
        what=f"Access key “{created.name}” was created for {target.name}.",
        owner=target.name,
        owner_id=target.id,
        client_id=created.client_id,
        client_secret=created.client_secret,
        server_url=str(request.base_url).rstrip("/"),
    )


@router.post("/admin/users/{key}/keys/{key_id}/revoke", response_model=None)
def revoke_key(
    key: str,
    key_id: str,
    request: Request,
    admin: User = Depends(admin_form),
    s: Session = Depends(get_session),
) -> Response:
    target = users.find_user(s, key)
    row = s.get(AccessKey, key_id) if findable(key_id) else None
    if row is None or row.user_id != target.id:
        raise NotFound("access key", f"{key_id} of {target.name}")
    name = row.name
    users.revoke_key(s, admin, key_id)
    response = RedirectResponse(f"/admin/users/{target.id}", status_code=303)
    set_notice(response, request, f"Access key {name} of {target.name} revoked; its sessions end.")
    return response


@router.post("/admin/users/{key}/projects", response_model=None)
async def add_to_project(
    key: str, request: Request, admin: User = Depends(admin_form), s: Session = Depends(get_session)
) -> Response:
    target = users.find_user(s, key)
    form = await request.form()
    errors: dict[str, str] = {}
    project_id, role = field(form, "project", errors), field(form, "role", errors)
    project = s.get(Project, project_id) if project_id else None
    if project is None:
        errors["project"] = "choose a project"
    if role not in ROLES:
        errors["role"] = f"one of {', '.join(ROLES)}"
    if errors or project is None:
        values = {"project": project_id, "role": role}
        return user_page(
            request, s, admin, target.id, errors=errors, values=values, status_code=400
        )
    projects.set_member(s, admin, project.id, target.id, role)  # type: ignore[arg-type]
    response = RedirectResponse(f"/admin/users/{target.id}", status_code=303)
    set_notice(response, request, f"{target.name} is now {role} in project {project.name}.")
    return response


@router.post("/admin/users/{key}/projects/{project_id}/remove", response_model=None)
def remove_from_project(
    key: str,
    project_id: str,
    request: Request,
    admin: User = Depends(admin_form),
    s: Session = Depends(get_session),
) -> Response:
    target = users.find_user(s, key)
    project = s.get(Project, project_id) if findable(project_id) else None
    if project is None:
        raise NotFound("project", project_id)
    projects.remove_member(s, admin, project.id, target.id)
    response = RedirectResponse(f"/admin/users/{target.id}", status_code=303)
    set_notice(response, request, f"{target.name} removed from project {project.name}.")
    return response

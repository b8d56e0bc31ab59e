"""Admin pages: the users (create, delete, their projects) and their access
keys (``admin_keys``). Global admins only; everyone else gets a 403 page.

Every write goes through the same services as ``/api/v1/users`` (the same
checks: the last admin stays, nobody deletes themselves, names unique), and
a form's input is validated with the API's own models before anything is
written, so a refused form creates nothing and says why next to its field.
A new secret is shown once, on the page that answers the POST (never in a
URL, a cookie, a notice or a log), and never again.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ringleader.errors import Conflict, NotFound
from ringleader.server.deps import get_session
from ringleader.server.models import AccessKey, Project, User
from ringleader.server.schemas import UserIn
from ringleader.server.services import projects, users
from ringleader.server.ui import admin_keys
from ringleader.server.ui.admin_common import (
    ROLES,
    admin_form,
    admin_user,
    field,
    project_names,
    pydantic_errors,
)
from ringleader.server.ui.render import page

router = APIRouter(include_in_schema=False)


def key_summaries(s: Session) -> dict[str, tuple[int, Any]]:
    """user id -> (number of access keys, when one was last used), in one query."""
    query = select(AccessKey.user_id, func.count(), func.max(AccessKey.last_used_at)).group_by(
        AccessKey.user_id
    )
    return {user_id: (count, last) for user_id, count, last in s.execute(query)}


def users_page(
    request: Request,
    s: Session,
    admin: User,
    errors: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    return page(
        request,
        "admin_users.html",
        admin,
        status_code=status_code,
        title="Users",
        users=users.list_users(s, admin),
        keys=key_summaries(s),
        projects=project_names(s),
        roles=ROLES,
        errors=errors or {},
        values=values or {},
    )


@router.get("/admin", response_model=None)
def admin_home(admin: User = Depends(admin_user)) -> Response:
    return RedirectResponse("/admin/users", status_code=303)


@router.get("/admin/users", response_class=HTMLResponse)
def list_users(
    request: Request, admin: User = Depends(admin_user), s: Session = Depends(get_session)
) -> HTMLResponse:
    return users_page(request, s, admin)


@router.post("/admin/users", response_class=HTMLResponse)
async def create_user(
    request: Request, admin: User = Depends(admin_form), s: Session = Depends(get_session)
) -> HTMLResponse:
    """Check everything (the API's model, a free name, the project), then write."""
    form = await request.form()
    errors: dict[str, str] = {}
    values = {
        "username": field(form, "username", errors),
        "os_user": field(form, "os_user", errors),
        "is_admin": form.get("is_admin") == "on",
        "project": field(form, "project", errors),
        "role": field(form, "role", errors) or "researcher",
    }
    if not values["username"]:
        errors.setdefault("username", "a name is required")
    body = None
    try:
        body = UserIn.model_validate(
            {
                "username": values["username"],
                "isAdmin": values["is_admin"],
                "osUser": values["os_user"] or None,
            }
        )
    except ValidationError as exc:
        names = {"username": "username", "osUser": "os_user"}
        errors = pydantic_errors(exc, names) | errors
    if values["role"] not in ROLES:
        errors["role"] = f"one of {', '.join(ROLES)}"
    project = None
    if values["project"]:
        project = s.get(Project, values["project"])
        if project is None:
            errors["project"] = "no such project (it may have just been deleted)"
    if body is not None and "username" not in errors:
        taken = s.scalar(select(User.id).where(User.name == body.username))
        if taken is not None:
            errors["username"] = f"a user named {body.username!r} already exists"
    if errors or body is None:
        return users_page(request, s, admin, errors, values, status_code=400)
    created = users.create(s, admin, body)
    if project is not None:
        try:
            projects.set_member(s, admin, project.id, created.id, values["role"])
        except (NotFound, Conflict) as exc:  # the project went meanwhile: undo the user
            s.rollback()
            users.remove(s, admin, created.id)
            errors["project"] = str(exc)
            return users_page(request, s, admin, errors, values, status_code=409)
    return page(
        request,
        "admin_secret.html",
        admin,
        status_code=201,
        title="User created",
        what=f"User {created.username} was created with the access key “default”.",
        owner=created.username,
        owner_id=created.id,
        client_id=created.client_id,
        client_secret=created.client_secret,
        server_url=str(request.base_url).rstrip("/"),
    )


# The user's own page, its access keys and projects: after this module's routes.
router.include_router(admin_keys.router)

"""Who may do what in a project: the one table of roles and the one check.

Nomenclature (Run:ai's): a user's *role* in a project is ``admin``,
``researcher`` or ``viewer`` (``project_members.role``); a *global admin*
(``users.is_admin``) may do everything everywhere.

Invariants:
- every entry point that reads or changes a workload or a project asks
  ``require_role`` (reads also go through ``workloads.may_use``, membership);
- a project the caller is not a member of is "not found" (404), never
  "forbidden": its existence is not revealed; a member without the right
  role gets a 403 that names the role needed;
- users, projects and nodes are managed by global admins only
  (``require_global_admin``);
- a pod token's session (``auth.pod_project``) sees no project but its own,
  and acts there with its user's role (a global admin's pod token included).
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.errors import Forbidden, NotFound
from ringleader.server.auth import pod_project
from ringleader.server.models import Project, ProjectMember, User

Role = Literal["admin", "researcher", "viewer"]
ROLES: tuple[Role, ...] = ("admin", "researcher", "viewer")
Action = Literal["view", "run", "manage-members"]

# What each project role may do; docs/users.md's table says the same.
ALLOWED: dict[Action, frozenset[str]] = {
    "view": frozenset({"admin", "researcher", "viewer"}),  # list, describe, pods, events, logs
    "run": frozenset({"admin", "researcher"}),  # submit, delete, suspend, resume, exec
    "manage-members": frozenset({"admin"}),  # add, change and remove members
}
_WHAT: dict[Action, str] = {
    "view": "see workloads",
    "run": "run, stop or exec into workloads",
    "manage-members": "manage members",
}


def role_in(session: Session, user: User, project_id: str) -> str | None:
    """``user``'s role in the project, or None when not a member."""
    return session.scalar(
        select(ProjectMember.role).where(
            ProjectMember.project_id == project_id, ProjectMember.user_id == user.id
        )
    )


def require_role(session: Session, user: User, project: Project | str, action: Action) -> None:
    """Raise unless ``user`` may do ``action`` in ``project`` (a row or its id)."""
    project_id = project if isinstance(project, str) else project.id
    confined = pod_project(session)
    if confined is None:
        if user.is_admin:
            return
        role = role_in(session, user, project_id)
    elif confined != project_id:
        role = None
    else:  # a pod's token is no admin, global or of its project: a researcher at most
        role = role_in(session, user, project_id)
        if role == "admin" or (role is None and user.is_admin):
            role = "researcher"
    if role in ALLOWED[action]:
        return
    row = session.get(Project, project_id) if isinstance(project, str) else project
    name = row.name if row is not None else project_id
    if role is None:
        raise NotFound("project", name)
    needed = " or ".join(sorted(ALLOWED[action]))
    raise Forbidden(
        f"a {role} of project {name!r} cannot {_WHAT[action]}; that needs the role {needed}"
    )


def require_global_admin(user: User, what: str) -> None:
    """Users, projects, quotas and nodes are everyone's: only global admins change them."""
    if not user.is_admin:
        raise Forbidden(f"only an admin can {what}")

"""Projects (Run:ai org-unit projects): quotas per node pool, members and their roles.

Quotas are stored as given (a list of per-node-pool resources) and used by
the scheduler; here they are only validated and recorded. Each write commits
and answers with the project's view (``views.project_out``), so a route or a
UI handler is one call. Global admins create projects and set quotas; a
project's admins (and global admins) manage its members (``roles``).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.errors import Conflict, NotFound
from ringleader.server.models import Project, ProjectMember, User, Workload
from ringleader.server.schemas import MemberOut, NodePoolResources, ProjectIn, ProjectOut
from ringleader.server.services.roles import Role, require_global_admin, require_role
from ringleader.server.services.users import find_user
from ringleader.server.services.views import project_out
from ringleader.server.services.workloads import resolve_project


def _resources(items: list[NodePoolResources]) -> list[dict]:
    pools = [r.node_pool for r in items]
    if len(set(pools)) != len(pools):
        raise Conflict("each node pool may appear once in resources")
    return [r.model_dump(mode="json", by_alias=True) for r in items]


def require_admin(user: User, what: str) -> None:
    """Quotas decide who may take GPUs from whom: only (global) admins set them."""
    require_global_admin(user, what)


def create(session: Session, user: User, body: ProjectIn) -> ProjectOut:
    """A new project with ``user`` (an admin) as its first member."""
    require_admin(user, "create projects")
    if session.scalar(select(Project).where(Project.name == body.name)) is not None:
        raise Conflict(f"a project named {body.name!r} already exists")
    project = Project(name=body.name, resources=_resources(body.resources))
    session.add(project)
    session.flush()
    session.add(ProjectMember(project_id=project.id, user_id=user.id, role="admin"))
    session.commit()
    return project_out(project)


def update(
    session: Session, user: User, key: str, resources: list[NodePoolResources]
) -> ProjectOut:
    """Replace a project's quotas (admins only)."""
    require_admin(user, "set a project's quotas")
    project = resolve_project(session, user, key)
    project.resources = _resources(resources)
    session.commit()
    return project_out(project)


def delete(session: Session, user: User, key: str) -> None:
    """Remove a project that no longer has workloads (admins only)."""
    require_admin(user, "delete projects")
    project = resolve_project(session, user, key)
    live = session.scalar(
        select(Workload.name)
        .where(Workload.project_id == project.id, Workload.deleted_at.is_(None))
        .limit(1)
    )
    if live is not None:
        raise Conflict(
            f"project {project.name!r} still has workloads (e.g. {live!r}); delete them first"
        )
    session.delete(project)
    session.commit()


# ----- members -------------------------------------------------------------------


def members(session: Session, user: User, key: str) -> list[MemberOut]:
    """Who is in the project, with their roles (any member may see it)."""
    project = resolve_project(session, user, key)
    require_role(session, user, project, "view")
    rows = session.execute(
        select(User.id, User.name, ProjectMember.role)
        .join(ProjectMember, ProjectMember.user_id == User.id)
        .where(ProjectMember.project_id == project.id)
        .order_by(User.name)
    ).all()
    return [MemberOut(user_id=i, username=n, role=r) for i, n, r in rows]


def set_member(session: Session, user: User, key: str, member: str, role: Role) -> MemberOut:
    """Add ``member`` (a user's id or name) to the project with ``role``, or change its role."""
    project = resolve_project(session, user, key)
    require_role(session, user, project, "manage-members")
    target = find_user(session, member)
    row = session.get(ProjectMember, (project.id, target.id))
    if row is None:
        session.add(ProjectMember(project_id=project.id, user_id=target.id, role=role))
    else:
        row.role = role
    session.commit()
    return MemberOut(user_id=target.id, username=target.name, role=role)


def remove_member(session: Session, user: User, key: str, member: str) -> None:
    """Take ``member`` out of the project (its workloads there stay)."""
    project = resolve_project(session, user, key)
    require_role(session, user, project, "manage-members")
    target = find_user(session, member)
    row = session.get(ProjectMember, (project.id, target.id))
    if row is None:
        raise NotFound("member", f"{target.name} of project {project.name}")
    session.delete(row)
    session.commit()

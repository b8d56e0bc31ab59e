"""Projects (Run:ai org-unit projects): quotas per node pool, members.

Quotas are stored as given (a list of per-node-pool resources) and used by
the scheduler; here they are only validated and recorded. Each write commits
and answers with the project's view (``views.project_out``), so a route or a
UI handler is one call.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.errors import Conflict, Forbidden
from ringleader.server.models import Project, ProjectMember, User, Workload
from ringleader.server.schemas import NodePoolResources, ProjectIn, ProjectOut
from ringleader.server.services.views import project_out
from ringleader.server.services.workloads import resolve_project


def _resources(items: list[NodePoolResources]) -> list[dict]:
    pools = [r.node_pool for r in items]
    if len(set(pools)) != len(pools):
        raise Conflict("each node pool may appear once in resources")
    return [r.model_dump(mode="json", by_alias=True) for r in items]


def require_admin(user: User, what: str) -> None:
    """Quotas decide who may take GPUs from whom: only admins set them."""
    if not user.is_admin:
        raise Forbidden(f"only an admin can {what}")


def create(session: Session, user: User, body: ProjectIn) -> ProjectOut:
    """A new project with ``user`` (an admin) as its first member."""
    require_admin(user, "create projects")
    if session.scalar(select(Project).where(Project.name == body.name)) is not None:
        raise Conflict(f"a project named {body.name!r} already exists")
    project = Project(name=body.name, resources=_resources(body.resources))
    session.add(project)
    session.flush()
    session.add(ProjectMember(project_id=project.id, user_id=user.id))
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

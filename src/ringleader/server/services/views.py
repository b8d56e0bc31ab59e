"""Views: what the API and the web UI show of workloads, pods, events,
projects and the caller, as the wire models of ``server/schemas.py`` (nodes:
``node_views``).

Nomenclature: a *view* takes a Session, the calling ``User`` and plain
arguments, reads, and returns a wire model (or a list of them); it never
writes, commits or calls a backend. The REST routers return a view as is;
the UI renders the same objects, so both show the same facts by one code
path, and a test can call a view without HTTP.

Invariants:
- visibility is the services' (``workloads.get``/``list_workloads``): a
  workload of another project is "not found", never "forbidden"; node
  allocations count everyone's pods but name only visible ones;
- names of projects and creators are looked up per page, in two queries
  whatever its length, never per row;
- pods are ordered master/launcher first, then by index; events by id;
- a list shows each workload's spec as a summary (``spec_summary``: no
  command, args or variables, so a page's size is bounded by its length,
  not by what tenants typed) unless the full view is asked for; one
  workload (describe) always has its whole spec.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ringleader.errors import RingleaderError
from ringleader.launch.frameworks import HEAD_ROLES
from ringleader.server.models import (
    Event,
    Pod,
    Project,
    ProjectMember,
    User,
    Workload,
)
from ringleader.server.schemas import (
    EventOut,
    MeOut,
    PodOut,
    ProjectOut,
    WorkloadCount,
    WorkloadList,
    WorkloadOut,
)
from ringleader.server.services import runai_shapes
from ringleader.server.services.workload_list import list_workloads
from ringleader.server.services.workloads import (
    get,
    requested,
    resolve_project,
    visible_projects,
)
from ringleader.server.snapshot import allocated
from ringleader.spec import WorkloadSpec

# ----- workloads ------------------------------------------------------------------------


def workload(
    session: Session, user: User, workload_id: str, *, cluster_id: str = ""
) -> WorkloadOut:
    """One workload ``user`` may see (404 otherwise)."""
    return workload_out(session, get(session, user, workload_id), cluster_id=cluster_id)


def workloads(
    session: Session,
    user: User,
    *,
    filters: Sequence[str] = (),
    sort_by: str = "createdAt",
    sort_order: str = "desc",
    offset: int = 0,
    limit: int = 50,
    view: Literal["summary", "full"] = "full",
    cluster_id: str = "",
) -> WorkloadList:
    """A page of the workloads ``user`` may see, filtered and sorted, with the total;
    ``view``: their specs whole or summarized (``spec_summary``; the API's default);
    ``next``: the offset of the next page (Run:ai's), None on the last."""
    rows, total = list_workloads(
        session,
        user,
        filters=filters,
        sort_by=sort_by,
        sort_order=sort_order,
        offset=offset,
        limit=limit,
    )
    names = workload_names(session, rows)
    changed = phase_changes(session, rows)
    return WorkloadList(
        workloads=[
            workload_out(
                session, w, names, full=view == "full", cluster_id=cluster_id, changed=changed
            )
            for w in rows
        ],
        total=total,
        offset=offset,
        limit=limit,
        view=view,
        next=offset + len(rows) if offset + len(rows) < total else None,
    )


def workload_count(session: Session, user: User, filters: Sequence[str] = ()) -> WorkloadCount:
    """How many workloads ``user`` may see match ``filters``."""
    return WorkloadCount(count=list_workloads(session, user, filters=filters, limit=1)[1])


def workload_names(session: Session, rows: Sequence[Workload]) -> dict[str, str]:
    """Project and creator names of ``rows``, in two queries whatever their number."""
    projects = {w.project_id for w in rows}
    users = {w.created_by for w in rows if w.created_by}
    names = dict(
        session.execute(select(Project.id, Project.name).where(Project.id.in_(projects))).all()
    )
    if users:
        names |= dict(session.execute(select(User.id, User.name).where(User.id.in_(users))).all())
    return names


def phase_changes(session: Session, rows: Sequence[Workload]) -> dict[str, datetime]:
    """When each of ``rows`` last changed phase (Run:ai's ``phaseUpdatedAt``), in one query."""
    if not rows:
        return {}
    query = (
        select(Event.workload_id, func.max(Event.time))
        .where(Event.workload_id.in_([w.id for w in rows]), Event.type == "PhaseChanged")
        .group_by(Event.workload_id)
    )
    return {workload_id: time for workload_id, time in session.execute(query).all()}


# What a summary leaves out of each pod spec: the bodies a tenant sizes.
_BULKY = ("command", "args", "environmentVariables")


def spec_summary(spec: dict[str, Any]) -> dict[str, Any]:
    """The stored spec without its pods' command, args and variables (their count stays:
    ``environmentVariableCount``); the same field names otherwise."""

    def pod(body: dict[str, Any]) -> dict[str, Any]:
        kept = {k: v for k, v in body.items() if k not in _BULKY}
        if body.get("environmentVariables"):
            kept["environmentVariableCount"] = len(body["environmentVariables"])
        return kept

    summary = dict(spec)
    for key in ("spec", "masterSpec"):
        if isinstance(spec.get(key), dict):
            summary[key] = pod(spec[key])
    return summary


def workload_out(
    session: Session,
    row: Workload,
    names: dict[str, str] | None = None,
    *,
    full: bool = True,
    cluster_id: str = "",
    changed: dict[str, datetime] | None = None,
) -> WorkloadOut:
    """The wire form of a row; ``names`` (id -> name of projects and users) and
    ``changed`` (``phase_changes``) save queries per row when a page of rows is
    shown; ``full``: the whole spec, else its summary."""
    names = names if names is not None else workload_names(session, [row])
    changed = changed if changed is not None else phase_changes(session, [row])
    spec = WorkloadSpec.from_stored(row.spec)
    pods: list[Pod] = list(row.pods)
    asked = requested(spec)  # what the row's requested_* columns hold, by one rule
    pod_count = asked["requested_pods"]
    pending = row.phase == "Pending" and row.phase_reason == "Unschedulable"
    project_name = names.get(row.project_id, row.project_id)
    creator = names.get(row.created_by or "")
    runai = runai_shapes.workload_fields(
        row,
        spec,
        cluster_id=cluster_id,
        namespace=runai_shapes.namespace(project_name),
        phase_updated_at=changed.get(row.id),
        submitted_by=creator,
    )
    return WorkloadOut(
        workload_id=row.id,
        name=row.name,
        framework=row.framework,
        project_id=row.project_id,
        project_name=project_name,
        created_by=creator,
        created_at=row.created_at,
        started_at=row.started_at,
        completed_at=row.completed_at,
        desired_phase=row.desired_phase,
        actual_phase=row.phase,
        phase_reason=row.phase_reason,
        phase_message=row.phase_message,
        image=spec.spec.image,
        requested_pods=pod_count,
        running_pods=sum(p.phase == "Running" for p in pods),
        pending_pods=sum(p.phase == "Pending" for p in pods)
        if pods
        else (pod_count if row.phase in ("Pending", "Creating") else 0),
        requested_gpus=asked["requested_gpus"],  # rounded: 3 x 0.1 is 0.3
        allocated_gpus=round(allocated(row), 6),
        nodes=sorted({p.node for p in pods if p.phase == "Running" and p.node}),
        pending_reason=row.phase_message if pending else None,
        attempt=row.attempt,
        backend=row.backend,
        backend_ref=backend_ref(row.backend, row.handle),
        spec=row.spec if full else spec_summary(row.spec),
        **runai,
    )


def backend_ref(name: str | None, handle: str | None) -> str:
    """What the backend ``name`` says its ``handle`` is (``Slurm job 42``), or ""."""
    if not name or not handle:
        return ""
    from ringleader.server.backends import backend_class

    try:
        return backend_class(name).describe_handle(handle)
    except RingleaderError:  # a plug-in backend no longer installed
        return ""


def pods(session: Session, user: User, workload_id: str, *, cluster_id: str = "") -> list[PodOut]:
    """A workload's pods, the master or launcher first, then by index."""
    row = get(session, user, workload_id)
    spec = WorkloadSpec.from_stored(row.spec)
    project_name = row.project.name  # one row: its relationship, not the two-query batch
    rows = sorted(row.pods, key=lambda p: (p.role not in HEAD_ROLES, p.index))
    return [
        PodOut(
            name=p.name,
            role=p.role,
            index=p.index,
            node=p.node,
            status=p.phase,
            exit_code=p.exit_code,
            attempt=p.attempt,
            ranks=list(p.ranks or []),
            gpus=list(p.gpus or []),
            started_at=p.started_at,
            completed_at=p.completed_at,
            peak_memory_bytes=p.peak_memory_bytes,
            cpu_seconds=p.cpu_seconds,
            isolation=p.isolation,
            **runai_shapes.pod_fields(
                p, row, spec, cluster_id=cluster_id, project_name=project_name
            ),
        )
        for p in rows
    ]


def events(
    session: Session,
    user: User,
    workload_id: str,
    *,
    cluster_id: str = "",
    offset: int = 0,
    limit: int | None = None,
    newest_first: bool = False,
) -> list[EventOut]:
    """A workload's events (phase changes, submissions, stand-ins), oldest first
    (``newest_first``: Run:ai's default order); ``offset``/``limit``: a page."""
    row = get(session, user, workload_id)
    order = Event.id.desc() if newest_first else Event.id
    query = select(Event).where(Event.workload_id == row.id).order_by(order).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    project_name = row.project.name  # one row: its relationship, not the two-query batch
    namespace = runai_shapes.namespace(project_name)
    return [
        EventOut(
            id=str(e.id),
            time=e.time,
            type=e.type,
            pod_name=e.pod_name,
            from_phase=e.from_phase,
            to_phase=e.to_phase,
            reason=e.reason,
            message=e.message,
            **runai_shapes.event_fields(e, row, cluster_id=cluster_id, namespace=namespace),
        )
        for e in session.scalars(query)
    ]


# ----- projects and the caller ------------------------------------------------------------


def project_out(row: Project, cluster_id: str = "") -> ProjectOut:
    return ProjectOut(
        id=row.id,
        name=row.name,
        resources=row.resources,
        created_at=row.created_at,
        updated_at=row.updated_at,
        cluster_id=cluster_id,
    )


def project(session: Session, user: User, key: str, *, cluster_id: str = "") -> ProjectOut:
    """A project by id or name that ``user`` may use (404 otherwise)."""
    return project_out(resolve_project(session, user, key), cluster_id)


def projects(
    session: Session,
    user: User,
    *,
    cluster_id: str = "",
    offset: int = 0,
    limit: int | None = None,
) -> list[ProjectOut]:
    """The projects ``user`` may use (admins: all), by name; ``offset``/``limit``: a page."""
    query = select(Project).where(Project.id.in_(visible_projects(session, user)))
    query = query.order_by(Project.name).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    return [project_out(p, cluster_id) for p in session.scalars(query)]


def me(session: Session, user: User) -> MeOut:
    """Who the caller is and the projects they are a member of."""
    roles = dict(
        session.execute(
            select(Project.name, ProjectMember.role)
            .join(ProjectMember)
            .where(ProjectMember.user_id == user.id)
        ).all()
    )
    return MeOut(
        id=user.id, name=user.name, is_admin=user.is_admin, projects=sorted(roles), roles=roles
    )

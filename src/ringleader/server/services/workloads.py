"""Workload services: validate and record intent; the loops act on it.

Invariants:
- a request either creates the workload row (phase Pending, with its
  Submitted event) or raises before anything is added: nothing half-created;
- a user sees only workloads of projects they belong to (admins see all);
  another project's workload is "not found", never "forbidden"; changing
  one needs a role that may run workloads there (``roles.require_role``);
- DELETE / suspend / resume only record the desired phase and move the
  phase through the one door (``phases.transition``); loops do the I/O;
- a write (``accept``, ``record_intent``) commits its own transaction, so a
  route or a UI handler is one call; what is shown is built in ``views``;
- bad user input is an InvalidSpec (422) or NotFound (404), never a database
  error: a key with NUL finds nothing (PostgreSQL text cannot hold it);
- the list (filterBy / sortBy, through indexes) is ``workload_list``'s.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ringleader.errors import Conflict, InvalidSpec, NotFound
from ringleader.runai_fields import ignored_fields, ignored_message
from ringleader.sched import PRIORITY_CLASSES
from ringleader.server import host_paths, phases
from ringleader.server.auth import pod_project
from ringleader.server.backends import BackendSet
from ringleader.server.backends.base import check_supported
from ringleader.server.images import resolve_image
from ringleader.server.models import Project, ProjectMember, User, Workload, new_id
from ringleader.server.schemas import Accepted
from ringleader.server.services import idempotency
from ringleader.server.services.clusters import Cluster, check_cluster
from ringleader.server.services.roles import require_role
from ringleader.server.snapshot import pod_requests
from ringleader.spec import RUNNABLE_FRAMEWORKS, SPEC_VERSION, WorkloadSpec


def findable(key: str) -> bool:
    """False for a key no row can have: PostgreSQL text cannot hold NUL (a query raises)."""
    return "\x00" not in key


def visible_projects(session: Session, user: User) -> Select[Any]:
    query = select(Project.id)
    if not user.is_admin:
        query = query.join(ProjectMember).where(ProjectMember.user_id == user.id)
    if (confined := pod_project(session)) is not None:  # a pod token: its project only
        query = query.where(Project.id == confined)
    return query


def resolve_project(session: Session, user: User, key: str) -> Project:
    """A project by id or name that the user may use; 404 otherwise."""
    project = None
    if findable(key):
        project = session.get(Project, key) or session.scalar(
            select(Project).where(Project.name == key)
        )
    if project is None or not may_use(session, user, project.id):
        raise NotFound("project", key)
    return project


def may_use(session: Session, user: User, project_id: str) -> bool:
    """Admins use every project; others the projects they are members of; a pod
    token (``auth.pod_project``) its own project only."""
    if (confined := pod_project(session)) is not None and project_id != confined:
        return False
    if user.is_admin:
        return True
    member = select(ProjectMember.project_id).where(
        ProjectMember.project_id == project_id, ProjectMember.user_id == user.id
    )
    return session.scalar(member) is not None


def submit(
    session: Session,
    user: User,
    body: WorkloadSpec,
    *,
    backends: BackendSet | None = None,
    cluster: Cluster | None = None,
) -> Workload:
    """Validate ``body`` (against what the backend of its pool can do, when
    ``backends`` is given; its ``clusterId`` against ``cluster``) and add its row;
    nothing is flushed here."""
    check_cluster(body.cluster_id, cluster)
    project = resolve_project(session, user, body.project_id)
    require_role(session, user, project, "run")
    if body.framework not in RUNNABLE_FRAMEWORKS:
        raise InvalidSpec(
            f"{body.framework.value} workloads cannot run yet; ringleader runs "
            + " and ".join(f.value for f in RUNNABLE_FRAMEWORKS),
            "spec.distributedFramework",
        )
    framework = body.registered_framework
    refused = framework.check(body) if framework else None
    if refused is not None:
        raise InvalidSpec(*refused)
    if framework and not framework.layout.head_role and not body.master_spec_same_as_worker:
        raise InvalidSpec(
            f"{body.framework.value} workloads have no master pod (every pod is a worker, "
            "worker 0 leads): leave masterSpec out",
            "masterSpec",
        )
    if body.spec.priority_class and body.spec.priority_class not in PRIORITY_CLASSES:
        raise InvalidSpec(
            f"unknown priority class {body.spec.priority_class!r}; choose one of "
            + ", ".join(sorted(PRIORITY_CLASSES)),
            "spec.priorityClass",
        )
    backend = backends.for_pool(next(iter(body.spec.node_pools), None)) if backends else None
    if backend is not None:
        check_supported(backend, body)
    runtime = getattr(backend, "runtime", None) if backend is not None else None
    stand_in = resolve_image(body.master().image or body.spec.image, runtime=runtime)
    image = body.master().image or body.spec.image
    where = backend.name if backend is not None else "local"
    if image and stand_in is None and body.framework.value == "MPI" and where != "local":
        raise InvalidSpec(
            f"MPI workloads in an image ({image}) do not run on the {where} backend's "
            "nodes yet: submit to a pool of this server's own or SSH nodes, or leave the "
            "image out",
            "spec.image",
        )
    if stand_in is not None and not body.spec.command:
        body = body.model_copy(
            update={"spec": body.spec.model_copy(update={"command": stand_in.command})}
        )
    in_image = bool(image) and stand_in is None  # its own command runs without one
    images = getattr(backend, "images", None)
    host_paths.check(body, images.host_paths if images is not None else (), in_image)
    if not (body.master().argv() or body.spec.argv() or body.spec.interactive or in_image):
        raise InvalidSpec(
            "a command is required (the command to run in every pod) unless the workload "
            "is interactive",
            "spec.command",
        )
    name = f"{body.name}-{secrets.token_hex(3)}" if body.use_given_name_as_prefix else body.name
    # A taken name is found by the partial unique index when the route commits
    # (see ``name_taken``): one query fewer on every submission, and no race.
    stored = body.model_copy(update={"name": name, "project_id": project.id})
    workload = Workload(
        id=new_id(),  # known before the flush: a group commit answers before its flush
        name=name,
        project_id=project.id,
        created_by=user.id,
        spec=stored.model_dump(mode="json", by_alias=True, exclude_none=True),
        spec_version=SPEC_VERSION,
        framework=body.framework.value,
        desired_phase="Running",
        phase="Creating",
        **requested(stored),
    )
    session.add(workload)  # one flush, at commit: the events reach it by relationship
    phases.record_event(session, workload, "Submitted", message=f"submitted by {user.name}")
    ignored = ignored_paths(body)
    if ignored:
        phases.record_event(
            session, workload, "Warning", reason="IgnoredFields", message=ignored_message(ignored)
        )
    if stand_in is not None:
        phases.record_event(
            session,
            workload,
            "ImageStandIn",
            message=f"image {stand_in.image} is not here and cannot be pulled (no registry "
            f"reachable): it runs as {stand_in.note}"
            if runtime is not None
            else f"no container runtime: image {stand_in.image} runs as {stand_in.note}",
        )
    phases.transition(session, workload, "Pending", reason="Submitted")
    return workload


def requested(spec: WorkloadSpec) -> dict[str, Any]:
    """The row's ``requested_*`` columns: what all of ``spec``'s pods ask for, as
    the API shows it (``views.workload_out``: GPUs by device and portion, a GPU
    memory request counting as none; the table's CPU column: every pod's cores).

    Why stored: the list sorts by them in SQL for any number of rows, and they
    are fixed by the spec, which never changes after submit; the migration that
    added them (0008) filled existing rows with this same function."""
    asks = pod_requests(spec, spec.name)
    return {
        "requested_pods": len(asks),
        "requested_gpus": round(
            math.fsum(
                r.gpu_devices * (r.gpu_portion or 1.0) if r.gpu_memory_bytes is None else 0.0
                for r in asks
            ),
            6,
        ),
        "requested_cpu_cores": round(math.fsum(r.cpu_cores for r in asks), 6),
    }


def ignored_paths(body: WorkloadSpec) -> list[str]:
    """The Run:ai fields ``body`` gave that mean nothing here (``runai_fields``); a
    whole ``masterSpec`` when ``masterSpecSameAsWorker`` (the default) sets it aside."""
    if body.master_spec is not None and body.master_spec_same_as_worker:
        paths = [p for p in ignored_fields(body) if not p.startswith("masterSpec")]
        return ["masterSpec (masterSpecSameAsWorker is true)", *paths]
    return list(ignored_fields(body))


def name_taken(session: Session, workload: Workload) -> Conflict | None:
    """After a failed commit of a new ``workload``: the 409 if its name is taken."""
    existing = session.scalar(
        select(Workload).where(
            Workload.project_id == workload.project_id,
            Workload.name == workload.name,
            Workload.deleted_at.is_(None),
        )
    )
    if existing is None:
        return None
    project = session.get(Project, workload.project_id)
    return Conflict(
        f"a workload named {workload.name!r} already exists in project "
        f"{project.name if project else workload.project_id!r} "
        f"(id {existing.id}, {existing.phase}); delete it or choose another name"
    )


def accept(
    session: Session,
    user: User,
    body: WorkloadSpec,
    *,
    backends: BackendSet | None = None,
    cluster: Cluster | None = None,
    idempotency_key: str | None = None,
) -> Accepted:
    """Submit and commit: the 202 of POST .../distributed, or the 409 of a taken name.

    With ``idempotency_key``, a submission this user made before with that key and
    the same body answers as it did, and nothing new is made (``idempotency``)."""
    answer = accept_in(
        session, user, body, backends=backends, cluster=cluster, idempotency_key=idempotency_key
    )
    session.commit()
    return answer


def accept_in(
    session: Session,
    user: User,
    body: WorkloadSpec,
    *,
    backends: BackendSet | None = None,
    cluster: Cluster | None = None,
    idempotency_key: str | None = None,
    isolated: bool = True,
) -> Accepted:
    """``accept`` within the caller's transaction, which the caller commits.

    ``isolated``: the workload's rows are flushed in a savepoint of their own, so a
    taken name (or a retry that raced this one) undoes this submission alone, never
    what else the transaction holds; not ``isolated``: the rows are only added (the
    caller flushes, and runs it again isolated if that fails: ``group_commit``)."""
    body_digest = idempotency.digest(body) if idempotency_key is not None else None

    def replayed() -> Workload | None:
        if idempotency_key is None or body_digest is None:
            return None
        return idempotency.earlier(session, user, idempotency_key, body_digest)

    if not isolated:  # an earlier use of the key fails the caller's flush (unique index),
        # which runs this again isolated, where it is found: no query in the common case
        workload = submit(session, user, body, backends=backends, cluster=cluster)
        workload.idempotency_key, workload.request_digest = idempotency_key, body_digest
        return accepted(workload)
    earlier = replayed()
    if earlier is not None:
        return accepted(earlier)
    made: list[Workload] = []
    try:
        with session.begin_nested():  # flushed when it ends: a taken name raises here
            workload = submit(session, user, body, backends=backends, cluster=cluster)
            workload.idempotency_key, workload.request_digest = idempotency_key, body_digest
            made.append(workload)
    except IntegrityError:
        earlier = replayed()  # a retry with the same key raced this one, and won
        if earlier is not None:
            return accepted(earlier)
        conflict = name_taken(session, made[0]) if made else None
        if conflict is not None:
            raise conflict from None
        raise
    return accepted(workload)


def record_intent(
    session: Session,
    user: User,
    workload_id: str,
    change: Callable[[Session, Workload], None],
) -> Accepted:
    """Record what the user wants (``request_delete``, ``request_suspend``,
    ``request_resume``) and commit; the caller wakes the loops that act on it."""
    workload = get(session, user, workload_id, for_update=True)
    require_role(session, user, workload.project_id, "run")
    change(session, workload)
    session.commit()
    return accepted(workload)


def accepted(workload: Workload) -> Accepted:
    """What a recorded intent answers: the desired phase beside the actual one."""
    return Accepted(
        workload_id=workload.id,
        name=workload.name,
        desired_phase=workload.desired_phase,
        actual_phase=workload.phase,
    )


def get(session: Session, user: User, workload_id: str, *, for_update: bool = False) -> Workload:
    """The workload, if ``user`` may see it (404 otherwise). ``for_update``: its row
    locked until the commit (PostgreSQL), so a change decided on the phase read here
    never overwrites a phase another writer committed meanwhile (``pipeline.act``)."""
    workload = (
        session.get(Workload, workload_id, with_for_update=for_update, populate_existing=for_update)
        if findable(workload_id)
        else None
    )
    if (
        workload is None
        or workload.deleted_at is not None
        or not may_use(session, user, workload.project_id)
    ):
        raise NotFound("workload", workload_id)
    return workload

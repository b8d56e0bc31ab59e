"""The Run:ai fields of what ``views`` shows: a workload's, a pod's and an event's.

Why apart from ``views``: these are derived, never stored (Run:ai's names for
facts ringleader keeps otherwise: ``k8sPhase`` is the phase, the namespace is
``runai-<project>``, the category follows the priority), and one place says
how each is derived.

Invariants: pure functions of rows and the stored spec, no queries; every
name here is Run:ai's (``Workload``, ``Pod``, ``Event`` of its API).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ringleader import sched
from ringleader.server.models import Event, Pod, Workload
from ringleader.server.schemas import Condition, Container, InvolvedObject
from ringleader.server.snapshot import preemptible, priority
from ringleader.spec import WorkloadSpec

# What a workload is when its spec names no category: Run:ai's defaults by priority.
_CATEGORY = {sched.TRAIN: "Train", sched.BUILD: "Build"}


def namespace(project_name: str) -> str:
    """Run:ai's namespace of a project's workloads."""
    return f"runai-{project_name}"


def priority_class_name(spec: WorkloadSpec) -> str:
    """The spec's priority class, else Run:ai's default for its kind."""
    return spec.spec.priority_class or ("build" if spec.spec.interactive else "train")


def workload_fields(
    row: Workload,
    spec: WorkloadSpec,
    *,
    cluster_id: str,
    namespace: str,
    phase_updated_at: datetime | None,
    submitted_by: str | None,
) -> dict[str, Any]:
    """The Run:ai ``Workload`` fields ringleader's own do not already carry."""
    level = priority(spec)
    changed = phase_updated_at or row.created_at
    is_preemptible = preemptible(spec)
    return {
        "id": row.id,
        "phase": row.phase,
        "k8s_phase": row.phase,
        "phase_updated_at": changed,
        "k8s_phase_updated_at": changed,
        "updated_at": row.updated_at,
        "deleted_at": row.deleted_at,
        "cluster_id": cluster_id,
        "namespace": namespace,
        "priority": level,
        "priority_class_name": priority_class_name(spec),
        "preemptible": is_preemptible
        if is_preemptible is not None
        else level < sched.NON_PREEMPTIBLE_PRIORITY,
        "category": spec.spec.category or _CATEGORY.get(level, "Train"),
        "conditions": [
            Condition(
                type=row.phase,
                status="True",
                reason=row.phase_reason or None,
                message=row.phase_message or None,
                last_transition_time=changed,
            )
        ],
        "submitted_by": submitted_by,
        "images": [i for i in dict.fromkeys((spec.master().image, spec.spec.image)) if i],
        "distributed_framework": row.framework,
        "requested_node_pools": list(spec.spec.node_pools),
    }


def pod_fields(
    pod: Pod, workload: Workload, spec: WorkloadSpec, *, cluster_id: str, project_name: str
) -> dict[str, Any]:
    """The Run:ai ``Pod`` fields of one of ``workload``'s pods."""
    pod_spec = spec.spec if pod.role == "worker" else spec.master()
    return {
        "id": pod.id,
        "workload_id": workload.id,
        "workload_name": workload.name,
        "project_id": workload.project_id,
        "project_name": project_name,
        "cluster_id": cluster_id,
        "node_name": pod.node or None,
        "priority_class_name": priority_class_name(spec),
        "k8s_phase": pod.phase,
        "k8s_phase_updated_at": pod.updated_at,
        "created_at": pod.created_at,
        "updated_at": pod.updated_at,
        "containers": [
            Container(
                name=pod.name,
                image=pod_spec.image or spec.spec.image or "",
                started_at=pod.started_at,
            )
        ],
    }


def event_fields(event: Event, workload: Workload, *, cluster_id: str, namespace: str) -> dict:
    """The Run:ai ``Event`` fields of one of ``workload``'s events."""
    return {
        "created_at": event.time,
        "cluster_id": cluster_id,
        "involved_object": InvolvedObject(
            uid=workload.id,
            kind="Pod" if event.pod_name else "Workload",
            name=event.pod_name or workload.name,
            namespace=namespace,
        ),
    }

"""One workload's page at /workloads/{id}: status, spec, pods, events, logs and charts.

What it shows comes from the API's views (``services.views``: the workload,
its pods, its events), its logs from ``services.logs`` (``workload_logs``)
and its charts from ``services.metrics``: one source for each fact, and the
same visibility as the API (another project's workload is a 404 page, and
so are its live, logs and metrics answers).

Live updates: ``/live`` answers the page's changing parts as HTML pieces
with a version (a digest); a poll that sends the version it has gets
``{"same": true}`` (a few bytes) while nothing changed.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from ringleader.server.deps import get_session
from ringleader.server.models import User
from ringleader.server.phases import FINAL
from ringleader.server.routers.clusters import this_cluster_id
from ringleader.server.schemas import WorkloadOut
from ringleader.server.services import views
from ringleader.server.services.metrics import MAX_POINTS, workload_metrics
from ringleader.server.services.workload_intents import may_resume, may_suspend
from ringleader.server.ui import workload_logs
from ringleader.server.ui.render import fragment, page
from ringleader.server.ui.session import ui_user
from ringleader.server.ui.workload_cli import REDACTED, api_body, cli_command, is_secret
from ringleader.server.workload_words import WAITING, gpu_text, why_waiting

router = APIRouter(include_in_schema=False)
router.include_router(workload_logs.router)

MAX_EVENTS = 200  # events on the page (the API pages through all of them)
FINISHED = (*FINAL, "Deleted")  # nothing changes any more: the page stops polling


def status_of(w: WorkloadOut) -> dict[str, Any]:
    """The status line and what explains it: why it waits, or what failed (first
    line, then the root cause's text: a traceback, the last lines of a rank)."""
    reason = w.phase_reason if w.phase_reason not in (None, "", w.actual_phase) else ""
    out: dict[str, Any] = {"phase": w.actual_phase, "reason": reason, "kind": None}
    if w.desired_phase not in ("Running", w.actual_phase):
        out["desired"] = w.desired_phase
    if w.actual_phase in WAITING:
        out |= {"kind": "waiting", "headline": why_waiting(w), "detail": ""}
    elif w.actual_phase == "Failed" or (w.phase_message and w.actual_phase != "Running"):
        first, _, rest = (w.phase_message or "").partition("\n")
        kind = "failed" if w.actual_phase == "Failed" else "note"
        out |= {"kind": kind, "headline": first or reason, "detail": rest.strip("\n")}
    return out


# The compute block's fields in words (the API body keeps their names).
_COMPUTE = {
    "gpuDevicesRequest": "GPU devices",
    "gpuRequestType": "GPU request by",
    "gpuPortionRequest": "GPU portion",
    "gpuPortionLimit": "GPU portion limit",
    "gpuMemoryRequest": "GPU memory",
    "gpuMemoryLimit": "GPU memory limit",
    "cpuCoreRequest": "CPU cores",
    "cpuCoreLimit": "CPU cores limit",
    "cpuMemoryRequest": "CPU memory",
    "cpuMemoryLimit": "CPU memory limit",
}


_MEMORY_UNITS = re.compile(r"^\s*([0-9.]+)\s*([KMGTPkmgtp]?)(i?)[Bb]?\s*$")


def compute_value(field: str, value: Any) -> str:
    """One compute value in the units the wizard asks in: a GPU portion as a share of
    a GPU (the API's 0.1 is the wizard's 10 %), memory with its unit spelled out."""
    if field in ("gpuPortionRequest", "gpuPortionLimit") and isinstance(value, int | float):
        return f"{value * 100:g}% of a GPU"
    if field.endswith(("MemoryRequest", "MemoryLimit")) and isinstance(value, str):
        found = _MEMORY_UNITS.match(value)
        if found:
            number, prefix, binary = found.groups()
            unit = f"{prefix.upper()}{binary}B" if prefix else "bytes"
            return f"{number} {unit}"
    return str(value)


def compute_words(compute: dict[str, Any]) -> str:
    """A compute block (wire names) in words: "GPU devices 1, GPU portion 10% of a GPU"."""
    return ", ".join(f"{_COMPUTE.get(k, k)} {compute_value(k, v)}" for k, v in compute.items())


# What is used where a spec sets nothing (the local, SSH and Slurm backends' planning).
NO_IMAGE = "none: the command runs as a process on the node (no container)"
OWN_WORKDIR = (
    "not set: the workload's own work directory (…/<workload id>/work, kept across restarts)"
)
NO_COMPUTE = "nothing asked: no GPU, no CPU or memory request"


def facts_of(w: WorkloadOut) -> list[tuple[str, str]]:
    """The spec in words: what runs, where, with what (secrets never shown)."""
    spec = w.spec.get("spec") or {}
    compute = spec.get("compute") or {}
    variables = [
        f"{v.get('name')}={REDACTED if is_secret(str(v.get('name'))) else v.get('value', '')}"
        for v in spec.get("environmentVariables") or []
    ]
    command = f"{spec.get('command') or ''} {spec.get('args') or ''}".strip()
    asks = compute_words(compute)
    own_workdir = OWN_WORKDIR.replace("<workload id>", w.workload_id)
    rows = [
        ("Type", f"{w.framework} distributed"),
        ("Project", w.project_name),
        ("Created by", w.created_by or "-"),
        ("Command", command or "-"),
        ("Image", spec.get("image") or NO_IMAGE),
        ("Working directory", spec.get("workingDir") or own_workdir),
        ("Workers", str(spec.get("numWorkers", "-"))),
        ("Compute per pod", asks or NO_COMPUTE),
        ("GPUs", f"{w.allocated_gpus:g} allocated of {w.requested_gpus:g} requested"),
        ("Pods", f"{w.running_pods} running of {w.requested_pods}"),
        ("Nodes", ", ".join(w.nodes) or "-"),
        ("Environment variables", "; ".join(variables) or "none"),
        ("Backoff limit", str(spec.get("backoffLimit", 6))),
        ("Restarts", str(w.attempt)),
    ]
    if w.backend:
        rows.append(("Backend", f"{w.backend} {w.backend_ref}".strip()))
    return rows


def _parts(s: Session, user: User, workload_id: str, cluster_id: str) -> dict[str, Any]:
    """What the page and its live updates render, from the API's views."""
    w = views.workload(s, user, workload_id, cluster_id=cluster_id)
    pods = views.pods(s, user, workload_id, cluster_id=cluster_id)
    # The newest MAX_EVENTS (a restart loop makes many), shown oldest first.
    latest = views.events(
        s, user, workload_id, cluster_id=cluster_id, limit=MAX_EVENTS, newest_first=True
    )
    events = latest[::-1]
    return {
        "w": w,
        "status": status_of(w),
        "facts": facts_of(w),
        "pods": pods,
        "gpus": {p.name: gpu_text(p.gpus) or "-" for p in pods},
        "events": events,
        "events_cut": len(events) == MAX_EVENTS,
        "can_stop": may_suspend(w.actual_phase, w.desired_phase),
        "can_run": may_resume(w.actual_phase, w.desired_phase),
        "final": w.actual_phase in FINISHED,
    }


_PIECES = {
    "status": "workload_status.html",
    "actions": "workload_actions.html",
    "facts": "workload_facts.html",
    "pods": "workload_pods.html",
    "events": "workload_events.html",
}


def _pieces(parts: dict[str, Any], csrf_token: str) -> dict[str, str]:
    from ringleader.server.ui.session import CSRF_FIELD

    ctx = {**parts, "csrf_token": csrf_token, "csrf_field": CSRF_FIELD}
    return {key: fragment(template, **ctx) for key, template in _PIECES.items()}


def _version(pieces: dict[str, str]) -> str:
    digest = hashlib.sha256("\x00".join(pieces[k] for k in sorted(pieces)).encode())
    return digest.hexdigest()[:16]


@router.get("/workloads/{workload_id}", response_class=HTMLResponse)
def workload_page(
    workload_id: str,
    request: Request,
    user: User = Depends(ui_user),
    s: Session = Depends(get_session),
) -> HTMLResponse:
    parts = _parts(s, user, workload_id, this_cluster_id(request))
    w: WorkloadOut = parts["w"]
    pieces = _pieces(parts, request.state.csrf_token)
    return page(
        request,
        "workload.html",
        user,
        title=w.name,
        pieces=pieces,
        version=_version(pieces),
        cli=cli_command(w.spec, w.project_name),
        body=api_body(w.spec),
        pod_names=[p.name for p in parts["pods"]] or [n for n, _, _ in _layout(w)],
        **parts,
    )


def _layout(w: WorkloadOut) -> list[tuple[str, str, int]]:
    """The pods it will have (for the log filter before any pod exists)."""
    from ringleader.spec import WorkloadSpec

    return WorkloadSpec.from_stored(w.spec).pod_layout(w.name)


@router.get("/workloads/{workload_id}/live")
def workload_live(
    workload_id: str,
    request: Request,
    version: str | None = Query(None, max_length=64),
    user: User = Depends(ui_user),
    s: Session = Depends(get_session),
) -> dict[str, Any]:
    """The page's changing parts, or ``same`` when they are what the page has."""
    parts = _parts(s, user, workload_id, this_cluster_id(request))
    pieces = _pieces(parts, request.state.csrf_token)
    now = _version(pieces)
    base = {"phase": parts["w"].actual_phase, "final": parts["final"], "version": now}
    if version == now:
        return {**base, "same": True}
    return {**base, "same": False, "pieces": pieces}


@router.get("/workloads/{workload_id}/metrics")
def workload_charts(
    workload_id: str,
    request: Request,
    since: float | None = Query(None, ge=0, le=1e11),
    user: User = Depends(ui_user),
    s: Session = Depends(get_session),
) -> Response:
    """What GET /api/v1/workloads/{id}/metrics answers (``since``: only newer points)."""
    found = workload_metrics(
        s,
        user,
        workload_id,
        backends=request.app.state.backends,
        since=since,
        max_points=MAX_POINTS,
    )
    return Response(found, media_type="application/json")

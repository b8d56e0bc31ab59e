"""The new-workload wizard (seed 002's path), at /workloads/new.

One page of sectioned steps (a stepper when script runs, all steps without
it). CREATE builds the very ``WorkloadSpec`` a client would POST to
/api/v1/workloads/distributed (``wizard_form.to_body``, the assets filling
what the user left empty as ``ringleader submit --environment-asset
--compute`` does) and submits it through the same service
(``services.workloads.accept``), so the UI and the API cannot disagree.
Every problem, pydantic's or the service's, goes back next to its field with
everything typed kept, and nothing is created. "+ New environment" and "+ New
compute resource" save the entered values as an asset of the project (through
``services.assets.create``) and select it, as the seed's walkthrough does.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.errors import Conflict, Forbidden, InvalidSpec, NotFound, RingleaderError
from ringleader.launch import frameworks
from ringleader.sched import PRIORITY_CLASSES
from ringleader.server.asset_schemas import (
    EnvironmentCreationRequest,
)
from ringleader.server.compute_asset_schemas import (
    ComputeCreationRequest,
)
from ringleader.server.deps import get_session
from ringleader.server.models import Project, User, Workload
from ringleader.server.services import assets
from ringleader.server.services import workloads as svc
from ringleader.server.services.assets import COMPUTE, ENVIRONMENT, AssetKind
from ringleader.server.ui import wizard_form as wf
from ringleader.server.ui import wizard_summary as ws
from ringleader.server.ui.render import page
from ringleader.server.ui.session import csrf_checked, set_notice, ui_user
from ringleader.spec import WorkloadSpec
from ringleader.spec_limits import MAX_ID_CHARS, check_name

router = APIRouter(include_in_schema=False)
router.include_router(ws.router)  # the Summary step's rows


def _projects(s: Session, user: User) -> list[Project]:
    query = select(Project).where(Project.id.in_(svc.visible_projects(s, user)))
    return list(s.scalars(query.order_by(Project.name)))


class _Choice(NamedTuple):
    """One asset in a select: its id, name and what it holds, in a few words."""

    id: str
    name: str
    about: str


def _asset_groups(s: Session, user: User, kind: AssetKind[Any, Any]) -> list[dict[str, Any]]:
    """The assets the user may pick, grouped: every project's first, then each of
    the user's projects' (the page's script shows only the chosen project's)."""
    groups: dict[str, dict[str, Any]] = {}
    for asset in assets.list_assets(s, user, kind):
        meta = asset.meta
        key = meta.project_id or ""
        label = f"Project {meta.project_name}" if key else "Every project"
        groups.setdefault(key, {"project": key, "label": label, "assets": []})
        groups[key]["assets"].append(_Choice(asset.meta.id, asset.meta.name, ws.about(asset.spec)))
    return sorted(groups.values(), key=lambda g: (g["project"] != "", g["label"]))


def _form_page(
    request: Request,
    s: Session,
    user: User,
    values: dict[str, str],
    errors: dict[str, str] | None = None,
    status_code: int = 200,
    saved: str | None = None,
    copied_from: str | None = None,
    start_step: str = "",
) -> HTMLResponse:
    errors = errors or {}
    summary = [(field, wf.label(field) if field else "Form", msg) for field, msg in errors.items()]
    return page(
        request,
        "wizard.html",
        user,
        status_code=status_code,
        title="New workload",
        v=values,
        errors=errors,
        summary=summary,
        projects=_projects(s, user),
        environments=_asset_groups(s, user, ENVIRONMENT),
        computes=_asset_groups(s, user, COMPUTE),
        priority_classes=sorted(PRIORITY_CLASSES),
        frameworks=framework_choices(),
        saved=saved,
        copied_from=copied_from,
        start_step=start_step,
        recap=ws.recap(s, user, values),
    )


def framework_choices() -> list[dict[str, str]]:
    """The wizard's framework step: every framework a spec can name, from the registry
    (a plug-in's too): its value, its label and its head pod's role ("" for none)."""
    return [
        {"value": f.spec_name, "label": f.label, "head": f.layout.head_role or ""}
        for f in frameworks.all_frameworks()
        if f.spec_name
    ]  # fmt: skip


def free_name(s: Session, project_id: str, base: str) -> str:
    """``BASE-copy`` (or ``-copy-2``, ...), free in the project and at most 63 characters."""
    stem = base[:50].rstrip("-")
    taken = set(
        s.scalars(
            select(Workload.name).where(
                Workload.project_id == project_id,
                Workload.deleted_at.is_(None),
                Workload.name.startswith(f"{stem}-copy", autoescape=True),
            )
        )
    )
    for n in range(1, len(taken) + 2):
        name = f"{stem}-copy" if n == 1 else f"{stem}-copy-{n}"
        if name not in taken:
            return name
    return f"{stem}-copy-{len(taken) + 2}"  # not reached: one of the above is free


@router.get("/workloads/new", response_class=HTMLResponse)
def new_workload(
    request: Request,
    project: str = Query("", max_length=MAX_ID_CHARS),
    copy: str = Query("", max_length=MAX_ID_CHARS),
    user: User = Depends(ui_user),
    s: Session = Depends(get_session),
) -> HTMLResponse:
    """The empty wizard in the user's current project (``current_project``), or
    ``?copy=ID`` filled from a workload the user can see ("Copy & edit"), renamed so the
    name is free."""
    if copy:
        workload = svc.get(s, user, copy)  # another project's: not found
        spec = WorkloadSpec.from_stored(workload.spec)
        values = wf.from_spec(spec, free_name(s, workload.project_id, workload.name))
        return _form_page(request, s, user, values, copied_from=workload.name)
    return _form_page(request, s, user, wf.defaults(current_project(s, user, project)))


def current_project(s: Session, user: User, asked: str = "") -> str:
    """The project a new workload goes to unless the user picks another: the one asked
    for (``?project=``: the workloads page's project filter carries it), else the
    project of the user's latest workload (where they work), else their first."""
    projects = _projects(s, user)
    ids = [p.id for p in projects]
    found = next((p.id for p in projects if asked and asked in (p.id, p.name)), None)
    if found is None and ids:
        latest = select(Workload.project_id).where(
            Workload.created_by == user.id, Workload.project_id.in_(ids)
        )
        found = s.scalar(latest.order_by(Workload.created_at.desc()).limit(1))
    return found or (ids[0] if ids else "")


@router.get("/workloads/new/name-check")
def name_check(
    project: str = Query("", max_length=MAX_ID_CHARS),
    name: str = Query("", max_length=255),
    user: User = Depends(ui_user),
    s: Session = Depends(get_session),
) -> dict[str, Any]:
    """Is ``name`` a valid workload name, free in ``project``? (the page asks as you type;
    CREATE checks again, the database's unique index last)."""
    name = name.strip()
    if not name:
        return {"available": False, "message": "A name is required."}
    try:
        check_name(name)
    except ValueError as exc:
        return {"available": False, "message": f"Not a valid name: {exc}."}
    if not project:
        return {"available": False, "message": "Choose a project first."}
    try:
        found = svc.resolve_project(s, user, project)
    except NotFound:
        return {"available": False, "message": "Choose a project first."}
    taken = s.scalar(
        select(Workload.id).where(
            Workload.project_id == found.id,
            Workload.name == name,
            Workload.deleted_at.is_(None),
        )
    )
    if taken is not None:
        return {
            "available": False,
            "message": f"A workload named {name!r} already exists in project {found.name!r}.",
        }
    return {"available": True, "message": f"{name!r} is free in project {found.name!r}."}


def _validation_errors(exc: ValidationError, values: dict[str, str], errors: wf.FieldErrors,
                       fallback: str = "", prefix: str = "") -> None:  # fmt: skip
    """Each problem on its field; ``prefix`` names a new-asset panel's own fields."""
    for error in exc.errors():
        loc = error["loc"]
        field = wf.field_for(loc) if loc and loc[0] != "meta" else ""
        if prefix:
            errors.add(prefix + field if field else fallback, error["msg"])
        else:
            errors.add(wf.blame_asset(field, values) or fallback, error["msg"])


def _service_errors(exc: RingleaderError, values: dict[str, str], errors: wf.FieldErrors,
                    name_field: str, prefix: str = "") -> None:  # fmt: skip
    """A service's refusal on its field: InvalidSpec's ``where``, a taken name on
    the name, a project one may not use on the project."""
    if isinstance(exc, InvalidSpec):
        for where, problem in exc.fields:
            field = wf.field_for(where)
            if prefix:
                errors.add(prefix + field if field else name_field, problem)
            else:
                errors.add(wf.blame_asset(field, values), problem)
    elif isinstance(exc, Conflict):
        errors.add(name_field, str(exc))
    elif isinstance(exc, (NotFound, Forbidden)):
        errors.add("project", str(exc))
    else:
        errors.add("", str(exc))


def _create_workload(
    request: Request, s: Session, user: User, values: dict[str, str], errors: wf.FieldErrors
) -> Response:
    project = ws.chosen_project(s, user, values, errors)
    chosen = {f: a.spec for f, a in ws.chosen_assets(s, user, values, project, errors).items()}
    body = wf.to_body(values, errors, chosen, project.id if project else "")
    spec = None
    try:
        spec = WorkloadSpec.model_validate(body)
    except ValidationError as exc:
        _validation_errors(exc, values, errors)
    if spec is None or errors:
        return _form_page(request, s, user, values, errors, status_code=422)
    state = request.app.state
    try:
        accepted = svc.accept(s, user, spec, backends=state.backends, cluster=state.cluster)
    except RingleaderError as exc:
        s.rollback()
        _service_errors(exc, values, errors, "name")
        return _form_page(request, s, user, values, errors, status_code=422)
    state.background.submitted()
    response = RedirectResponse(f"/workloads/{accepted.workload_id}", status_code=303)
    set_notice(response, request, f"Workload {accepted.name} created")
    return response


def _save_asset(
    request: Request,
    s: Session,
    user: User,
    values: dict[str, str],
    errors: wf.FieldErrors,
    kind: AssetKind[Any, Any],
) -> Response:
    """ "+ New environment" / "+ New compute resource": the panel's own fields saved as
    an asset of the project and selected; the workload is not created yet."""
    is_env = kind is ENVIRONMENT
    prefix = wf.NEW_ENV if is_env else wf.NEW_COMPUTE
    name_field = prefix + "name"
    own = (wf.environment_of if is_env else wf.compute_of)(values, prefix, errors)
    project = ws.chosen_project(s, user, values, errors)
    name = values[name_field].strip()
    if not name:
        errors.add(name_field, f"give the new {kind.title} a name")
    request_model: type[BaseModel] = (
        EnvironmentCreationRequest if is_env else ComputeCreationRequest
    )
    meta = {"name": name, "scope": "project", "project_id": project.id if project else ""}
    body = None
    try:
        body = request_model.model_validate({"meta": meta, "spec": own})
    except ValidationError as exc:
        _validation_errors(exc, values, errors, fallback=name_field, prefix=prefix)
    if body is None or errors:
        return _form_page(request, s, user, values, errors, status_code=422)
    try:
        made = assets.create(s, user, kind, body.meta, body.spec)  # type: ignore[attr-defined]
    except RingleaderError as exc:
        s.rollback()
        _service_errors(exc, values, errors, name_field, prefix=prefix)
        return _form_page(request, s, user, values, errors, status_code=422)
    cleared = (*wf.POD_TEXT, "env") if is_env else wf.COMPUTE_FIELDS
    values.update({prefix + field: "" for field in cleared})
    values.update({name_field: "", "environment" if is_env else "compute": made.meta.id})
    if not is_env:
        values[prefix + "gpu_request_type"] = "portion"
    saved = f"{kind.title.capitalize()} {made.meta.name} created and selected."
    step = "step-environment" if is_env else "step-compute"
    return _form_page(request, s, user, values, saved=saved, start_step=step)


@router.post("/workloads/new", response_model=None)
async def create(
    request: Request,
    user: User = Depends(csrf_checked),
    s: Session = Depends(get_session),
) -> Response:
    form = await request.form()
    errors = wf.FieldErrors()
    values = wf.bounded_values(form, errors)
    action = form.get("action") or "create"
    if action == "create-environment":
        return _save_asset(request, s, user, values, errors, ENVIRONMENT)
    if action == "create-compute":
        return _save_asset(request, s, user, values, errors, COMPUTE)
    if action != "create":
        errors.add("", "unknown action; use the form's buttons")
        return _form_page(request, s, user, values, errors, status_code=400)
    return _create_workload(request, s, user, values, errors)

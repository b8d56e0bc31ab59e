"""The wizard's last step, Summary: what CREATE will make, in words, before it is made.

Why on the server: the summary must say what the workload will really get, and
that is decided here: the chosen assets fill what the user left empty
(``wizard_form.to_body``, the same call CREATE makes). A summary rebuilt in the
browser would copy those rules and one day disagree with them. So the page
posts the form to ``/workloads/new/summary`` when the step opens and shows the
answer (rendered on the first load too, for a page without script).

Every row names a value or says in words what is used when none is set (the
image's absence, the workload's own working directory): never a bare "-".
Also here: how a chosen project and chosen assets are looked up and checked,
shared by the summary and CREATE.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError
from pydantic.alias_generators import to_camel
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from ringleader.errors import NotFound
from ringleader.launch import frameworks
from ringleader.server.compute_asset_schemas import ComputeAssetSpec
from ringleader.server.deps import get_session
from ringleader.server.models import Project, User
from ringleader.server.services import assets
from ringleader.server.services import workloads as svc
from ringleader.server.services.assets import COMPUTE, ENVIRONMENT, AssetKind
from ringleader.server.ui import wizard_form as wf
from ringleader.server.ui.render import fragment, with_headers
from ringleader.server.ui.session import csrf_checked
from ringleader.server.ui.workload_page import NO_COMPUTE, NO_IMAGE, OWN_WORKDIR, compute_words
from ringleader.spec import WorkloadSpec

router = APIRouter(include_in_schema=False)

ASSET_FIELDS: tuple[tuple[str, AssetKind[Any, Any]], ...] = (
    ("environment", ENVIRONMENT),
    ("compute", COMPUTE),
    (wf.MASTER + "environment", ENVIRONMENT),
    (wf.MASTER + "compute", COMPUTE),
)


def chosen_project(
    s: Session, user: User, values: dict[str, str], errors: wf.FieldErrors
) -> Project | None:
    """The form's project, if it is one of the user's; else an error on it."""
    if not values["project"]:
        errors.add("project", "choose a project")
        return None
    try:
        return svc.resolve_project(s, user, values["project"])
    except NotFound:
        errors.add("project", "no such project among yours; choose one from the list")
        return None


def _chosen_asset(
    s: Session,
    user: User,
    kind: AssetKind[Any, Any],
    field: str,
    values: dict[str, str],
    project: Project | None,
    errors: wf.FieldErrors,
) -> Any:
    """The asset picked in ``field``: one the user sees, of the chosen project or of
    every project; else an error on ``field``."""
    try:
        asset = assets.get(s, user, kind, values[field])
    except NotFound:
        errors.add(field, f"no such {kind.title}; choose one from the list")
        return None
    owner = asset.meta.project_id
    if owner is not None and (project is None or owner != project.id):
        errors.add(
            field,
            f"{kind.title} {asset.meta.name!r} belongs to project {asset.meta.project_name!r}; "
            "choose one of this project's or every project's",
        )
        return None
    return asset


def chosen_assets(
    s: Session,
    user: User,
    values: dict[str, str],
    project: Project | None,
    errors: wf.FieldErrors,
) -> dict[str, Any]:
    """The assets the form picks, by field (the master's only when it differs)."""
    chosen: dict[str, Any] = {}
    for field, kind in ASSET_FIELDS:
        if values[field] and (not field.startswith(wf.MASTER) or wf.differs(values)):
            asset = _chosen_asset(s, user, kind, field, values, project, errors)
            if asset is not None:
                chosen[field] = asset
    return chosen


def about(spec: Any) -> str:
    """An asset's values in a few words: an environment's image, a compute resource's asks."""
    if isinstance(spec, ComputeAssetSpec):
        parts = []
        if spec.gpu_portion_request is not None:
            parts.append(f"{spec.gpu_devices_request or 1} GPU x {spec.gpu_portion_request:.0%}")
        elif spec.gpu_memory_request is not None:
            parts.append(f"{spec.gpu_devices_request or 1} GPU x {spec.gpu_memory_request}")
        elif spec.gpu_devices_request:
            parts.append(f"{spec.gpu_devices_request} GPU")
        if spec.cpu_core_request is not None:
            parts.append(f"{spec.cpu_core_request:g} CPU")
        if spec.cpu_memory_request is not None:
            parts.append(spec.cpu_memory_request)
        return ", ".join(parts)
    return str(getattr(spec, "image", None) or getattr(spec, "command", None) or "")[:60]


def _assets_words(chosen: dict[str, Any], prefix: str, *steps: str) -> tuple[str, str]:
    """The chosen environment and compute resource (of the master: ``prefix``) in words."""
    env, compute = chosen.get(prefix + "environment"), chosen.get(prefix + "compute")
    return _asset_words(env, steps[0]), _asset_words(compute, steps[1])


def _asset_words(asset: Any, step: str) -> str:
    if asset is None:
        return f"none chosen: the values entered in step {step}"
    extra = about(asset.spec)
    return asset.meta.name + (f" ({extra})" if extra else "")


def _pod_rows(
    pod: dict[str, Any], interactive: bool, environment: str, compute_asset: str
) -> list[tuple[str, str]]:
    """What one pod runs, resolved (the assets' values filled in), after the assets."""
    command = f"{pod.get('command') or ''} {pod.get('args') or ''}".strip()
    if not command and interactive:
        command = "none: interactive, the pods stay up"
    elif not command:
        command = "none: the image's own command" if pod.get("image") else "none given"
    names = [str(v.get("name")) for v in pod.get("environment_variables") or []]
    compute = {to_camel(k): v for k, v in (pod.get("compute") or {}).items()}
    return [
        ("Environment", environment),
        ("Image", pod.get("image") or NO_IMAGE),
        ("Command", command),
        ("Working directory", pod.get("working_dir") or OWN_WORKDIR),
        ("Environment variables", ", ".join(names) or "none"),
        ("Compute resource", compute_asset),
        ("Compute per pod", compute_words(compute) or NO_COMPUTE),
    ]


def _shape(values: dict[str, str], workers: int) -> str:
    framework = values.get("framework") or "PyTorch"
    registered = frameworks.by_spec_name(framework)
    head = registered.layout.head_role if registered else "master"
    pods = f"{workers} worker{'s' if workers != 1 else ''}"
    if head:
        pods = f"a {head} and {pods}"
    return f"{framework} distributed training: {pods}"


def recap(s: Session, user: User, values: dict[str, str]) -> list[tuple[str, str]]:
    """The summary's rows for the form's ``values``: what CREATE would make."""
    errors = wf.FieldErrors()
    project = chosen_project(s, user, values, errors)
    chosen = chosen_assets(s, user, values, project, errors)
    specs = {field: asset.spec for field, asset in chosen.items()}
    body = wf.to_body(values, errors, specs, project.id if project else "")
    try:
        WorkloadSpec.model_validate(body)
    except ValidationError as exc:  # what CREATE would refuse, said before it is pressed
        for error in exc.errors():
            errors.add(wf.field_for(error["loc"]), error["msg"])
    spec = body["spec"]
    rows = [
        ("Project", project.name if project else "not chosen yet (step 1)"),
        ("Name", body["name"] or "not given yet (step 2)"),
        ("Type", _shape(values, int(spec.get("num_workers") or 1))),
        *_pod_rows(spec, bool(spec.get("interactive")), *_assets_words(chosen, "", "3", "4")),
        ("Backoff limit", str(spec.get("backoff_limit", 6))),
        ("Priority class", spec.get("priority_class") or "default (train)"),
        ("Preemptibility", spec.get("preemptibility") or "by priority (train is preemptible)"),
    ]
    if "master_spec" in body:
        own = _pod_rows(body["master_spec"], False, *_assets_words(chosen, wf.MASTER, "6", "6"))
        rows.append(("Master", "its own setup (step 6)"))
        rows += [(f"Master: {key.lower()}", value) for key, value in own]
    else:
        rows.append(("Master", "the workers' environment and compute"))
    for unset in ("project", "name"):  # its row says "not ... yet" already
        if not values[unset].strip():
            errors.pop(unset, None)
    if errors:
        problems = "; ".join(f"{wf.label(f) if f else 'Form'}: {m}" for f, m in errors.items())
        rows.append(("To fix first", problems))
    return rows


@router.post("/workloads/new/summary", response_class=HTMLResponse)
async def summary(
    request: Request,
    user: User = Depends(csrf_checked),
    s: Session = Depends(get_session),
) -> HTMLResponse:
    """The Summary step's rows for the form as it is now (the page asks when the step
    opens); nothing is created or saved (a reader session: ``deps.READ_ONLY_POSTS``)."""
    values = wf.bounded_values(await request.form(), wf.FieldErrors())
    rows = await run_in_threadpool(recap, s, user, values)  # its queries: off the event loop
    html = fragment("wizard_summary.html", recap=rows)
    return with_headers(HTMLResponse(html))

"""The new-workload wizard's form <-> the API's ``WorkloadSpec``.

Why a module of its own: the wizard must build exactly the body a client
would POST to /api/v1/workloads/distributed (so the UI and the API can never
disagree), and must put every problem next to the form field that caused it.
Both directions live here, pure (no I/O): ``to_body`` turns the form's strings
and the chosen assets into the API's body (the assets fill what the user left
empty, as ``ringleader submit --environment-asset/--compute`` does), and
``field_for`` turns a pydantic ``loc`` or an ``InvalidSpec.where`` into the
form field to mark.  ``from_spec`` goes back, for "Copy & edit".  The fields
themselves (names, labels, the API's name for each, ``field_for``) are in
``wizard_fields``, re-exported here so every name is still importable from
this module.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ringleader.server.asset_schemas import (
    EnvironmentAssetSpec,
)
from ringleader.server.compute_asset_schemas import ComputeAssetSpec
from ringleader.server.ui.wizard_fields import COMPUTE_FIELDS as COMPUTE_FIELDS
from ringleader.server.ui.wizard_fields import FIELDS as FIELDS
from ringleader.server.ui.wizard_fields import LABELS as LABELS
from ringleader.server.ui.wizard_fields import MASTER as MASTER
from ringleader.server.ui.wizard_fields import NEW_COMPUTE as NEW_COMPUTE
from ringleader.server.ui.wizard_fields import NEW_ENV as NEW_ENV
from ringleader.server.ui.wizard_fields import POD_FIELDS as POD_FIELDS
from ringleader.server.ui.wizard_fields import POD_TEXT as POD_TEXT
from ringleader.server.ui.wizard_fields import base_of as base_of
from ringleader.server.ui.wizard_fields import field_for as field_for
from ringleader.server.ui.wizard_fields import label as label
from ringleader.spec import PodSpec, WorkloadSpec
from ringleader.spec_limits import MAX_COMMAND_CHARS, MAX_ENV_TOTAL_CHARS

# Characters one field may hold: a command is as long as the API takes; the rest short.
_LONG = {"command": MAX_COMMAND_CHARS, "args": MAX_COMMAND_CHARS, "env": MAX_ENV_TOTAL_CHARS}
MAX_FIELD_CHARS = 4_096

_ENVIRONMENT_OWN = {"image", "command", "args", "working_dir", "env"}


# pydantic's wording -> the form's: "must be at least 1", not "Input should be ...".
_FRIENDLY = [
    (re.compile(r"^Input should be greater than or equal to (\S+)$"), r"must be at least \1"),
    (re.compile(r"^Input should be less than or equal to (\S+)$"), r"must be at most \1"),
    (re.compile(r"^Input should be greater than (\S+)$"), r"must be more than \1"),
    (re.compile(r"^Input should be less than (\S+)$"), r"must be less than \1"),
    (re.compile(r"^Input should be a valid integer.*$"), "must be a whole number"),
    (re.compile(r"^Input should be a finite number$"), "must be a number"),
    (re.compile(r"^Input should be a valid number.*$"), "must be a number"),
    (re.compile(r"^String should have at least 1 characters?$"), "is required"),
    (re.compile(r"^String should have at least (\d+) characters$"), r"at least \1 characters"),
    (re.compile(r"^String should have at most (\d+) characters$"), r"at most \1 characters"),
    (re.compile(r"^Field required$"), "is required"),
    # A refusal names things by name; the internal id it may add means nothing here.
    (re.compile(r" \(id [0-9a-f-]{36}(, ([^)]*))?\)"), r" (\2)"),
    (re.compile(r" \(\)"), ""),
]


def friendly(message: str) -> str:
    """A validation or service message in the UI's words (the API's stay as they are)."""
    text = message.removeprefix("Value error, ")
    for pattern, replacement in _FRIENDLY:
        text = pattern.sub(replacement, text)
    return text


class FieldErrors(dict[str, str]):
    """Form field (or "" for the form as a whole) -> its first problem."""

    def add(self, field: str | None, message: str) -> None:
        self.setdefault(field or "", friendly(message))


def bounded_values(form: Mapping[str, Any], errors: FieldErrors) -> dict[str, str]:
    """The known fields of a submitted form as strings; a value over its bound is an
    error on its field (and is cut, so the page showing it again stays small)."""
    values: dict[str, str] = {}
    for field in FIELDS:
        raw = form.get(field)
        value = raw if isinstance(raw, str) else ""
        bound = _LONG.get(base_of(field), MAX_FIELD_CHARS)
        if len(value) > bound:
            errors.add(field, f"at most {bound} characters; this has {len(value)}")
            value = value[:bound]
        values[field] = value
    return values


def _number(values: Mapping[str, str], field: str, errors: FieldErrors, whole: bool) -> Any:
    text = values.get(field, "").strip()
    if not text:
        return None
    try:
        number = int(text) if whole else float(text)
    except ValueError:
        errors.add(field, "a whole number, e.g. 2" if whole else "a number, e.g. 0.5")
        return None
    if not math.isfinite(number):
        errors.add(field, "a finite number")
        return None
    return number


def variables(text: str, field: str, errors: FieldErrors) -> list[dict[str, str]]:
    """``NAME=value`` lines (blank lines skipped) as the API's variables."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            errors.add(field, f"line {number}: expected NAME=value, got {line[:60]!r}")
            continue
        out.append({"name": name.strip(), "value": value})
    return out


def compute_of(values: Mapping[str, str], prefix: str, errors: FieldErrors) -> dict[str, Any]:
    """The compute block (Python names) of the form's own values; empty fields unset.
    A GPU portion or memory asks for one device unless more are given."""
    p = prefix
    compute: dict[str, Any] = {}
    devices = _number(values, p + "gpu_devices", errors, whole=True)
    kind = values.get(p + "gpu_request_type") or "portion"
    percent = _number(values, p + "gpu_portion", errors, whole=False)
    memory = values.get(p + "gpu_memory", "").strip()
    if percent is not None and kind != "portion":
        errors.add(p + "gpu_portion", "choose GPU request '% of device' to use it, or clear it")
    if memory and kind != "memory":
        errors.add(
            p + "gpu_memory", "choose GPU request 'memory per device' to use it, or clear it"
        )
    if kind == "portion" and percent is not None:
        if not 0 < percent <= 100:
            errors.add(p + "gpu_portion", "between 0 and 100 (% of one device), e.g. 10")
        else:
            compute.update(gpu_request_type="portion", gpu_portion_request=percent / 100)
    if kind == "memory" and memory:
        compute.update(gpu_request_type="memory", gpu_memory_request=memory)
    if devices is not None:
        compute["gpu_devices_request"] = devices
    elif "gpu_request_type" in compute:
        compute["gpu_devices_request"] = 1
    cores = _number(values, p + "cpu_cores", errors, whole=False)
    if cores is not None:
        compute["cpu_core_request"] = cores
    cpu_memory = values.get(p + "cpu_memory", "").strip()
    if cpu_memory:
        compute["cpu_memory_request"] = cpu_memory
    return compute


def environment_of(values: Mapping[str, str], prefix: str, errors: FieldErrors) -> dict[str, Any]:
    """The form's own image, command, args, working directory and variables."""
    pod: dict[str, Any] = {}
    for key in POD_TEXT:
        text = values.get(prefix + key, "")
        if text.strip():
            pod[key] = text.strip() if key in ("image", "working_dir") else text
    env = variables(values.get(prefix + "env", ""), prefix + "env", errors)
    if env:
        pod["environment_variables"] = env
    return pod


def pod_of(
    values: Mapping[str, str],
    prefix: str,
    errors: FieldErrors,
    environment: EnvironmentAssetSpec | None,
    compute: ComputeAssetSpec | None,
) -> dict[str, Any]:
    """One pod spec (Python names): what the user entered, the assets filling the rest."""
    pod = environment_of(values, prefix, errors)
    if environment is not None:
        pod = environment.fill(pod, working_dir_given="working_dir" in pod)
    own = compute_of(values, prefix, errors)
    pod["compute"] = compute.fill(own) if compute is not None else own
    return pod


def to_body(
    values: Mapping[str, str],
    errors: FieldErrors,
    assets: Mapping[str, Any],
    project_id: str,
) -> dict[str, Any]:
    """The body of POST /api/v1/workloads/distributed for the form (Python names).
    ``assets``: the chosen asset specs by field (``environment``, ``master_compute``...)."""
    spec = pod_of(values, "", errors, assets.get("environment"), assets.get("compute"))
    workers = _number(values, "workers", errors, whole=True)
    backoff = _number(values, "backoff_limit", errors, whole=True)
    spec.update(
        num_workers=workers if workers is not None else 1,
        distributed_framework=values.get("framework") or "PyTorch",
        interactive=values.get("interactive") == "on",
    )
    if backoff is not None:
        spec["backoff_limit"] = backoff
    for key in ("preemptibility", "priority_class"):
        if values.get(key):
            spec[key] = values[key]
    body: dict[str, Any] = {
        "name": values.get("name", "").strip(),
        "project_id": project_id,
        "spec": spec,
    }
    if differs(values):
        body["master_spec_same_as_worker"] = False
        body["master_spec"] = pod_of(
            values,
            MASTER,
            errors,
            assets.get(MASTER + "environment"),
            assets.get(MASTER + "compute"),
        )
    return body


def differs(values: Mapping[str, str]) -> bool:
    """The master has its own setup: "Workers & master" and the box ticked."""
    return values.get("topology") != "workers" and values.get("master_differs") == "on"


def blame_asset(field: str, values: Mapping[str, str]) -> str:
    """Where to show a problem of ``field`` whose value the user did not type: on the
    asset that gave it (the environment's or compute resource's select)."""
    if not field or values.get(field, "").strip():
        return field
    prefix = MASTER if field.startswith(MASTER) else ""
    base = field.removeprefix(MASTER)
    asset = prefix + ("environment" if base in _ENVIRONMENT_OWN else "compute")
    if (base in _ENVIRONMENT_OWN or base in COMPUTE_FIELDS) and values.get(asset):
        return asset
    return field


# ----- back: a stored spec -> the form (Copy & edit) -----------------------------


def _pod_values(pod: PodSpec, prefix: str) -> dict[str, str]:
    c = pod.compute
    values = {
        prefix + "image": pod.image or "",
        prefix + "command": pod.command or "",
        prefix + "args": pod.args or "",
        prefix + "working_dir": pod.working_dir or "",
        prefix + "env": "\n".join(
            f"{v.name}={v.value}" for v in pod.environment_variables if "\n" not in v.value
        ),
        prefix + "gpu_devices": "" if c.gpu_devices_request is None else str(c.gpu_devices_request),
        prefix + "gpu_request_type": c.gpu_request_type or "portion",
        prefix + "gpu_portion": (
            "" if c.gpu_portion_request is None else f"{c.gpu_portion_request * 100:g}"
        ),
        prefix + "gpu_memory": c.gpu_memory_request or "",
        prefix + "cpu_cores": "" if c.cpu_core_request is None else f"{c.cpu_core_request:g}",
        prefix + "cpu_memory": c.cpu_memory_request or "",
    }
    return values


def from_spec(spec: WorkloadSpec, name: str) -> dict[str, str]:
    """The form filled from a workload's stored spec (its assets' values are in it
    already: a workload keeps copies), named ``name``."""
    values = {field: "" for field in FIELDS}
    s = spec.spec
    values.update(_pod_values(s, ""))
    values.update(
        project=spec.project_id,
        framework=s.distributed_framework.value,
        topology="master",
        name=name,
        workers=str(s.num_workers),
        backoff_limit=str(s.backoff_limit),
        preemptibility=s.preemptibility or "",
        priority_class=s.priority_class or "",
        interactive="on" if s.interactive else "",
    )
    if not spec.master_spec_same_as_worker and spec.master_spec is not None:
        values["master_differs"] = "on"
        values.update(_pod_values(spec.master_spec, MASTER))
    return values


def defaults(project_id: str = "") -> dict[str, str]:
    """A new form: seed 002's choices (PyTorch, workers & master, 2 workers)."""
    values = {field: "" for field in FIELDS}
    values.update(
        project=project_id,
        framework="PyTorch",
        topology="master",
        workers="2",
        backoff_limit="6",
        gpu_request_type="portion",
        master_gpu_request_type="portion",
        new_compute_gpu_request_type="portion",
    )
    return values

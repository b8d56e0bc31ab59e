"""The new-workload wizard's fields: their names, their labels, and the API's name for each.

Why apart from ``wizard_form``: that module turns the form's values into the
API's body and back; this one is the vocabulary both directions, the page and
the summary share: which fields the form has (``FIELDS``, the master's and the
new-asset panels' prefixed copies), what each is called on the page
(``label``), and which of them an API problem is about (``field_for``, from a
pydantic ``loc`` or an ``InvalidSpec.where``).  Pure tables and lookups, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic.alias_generators import to_camel

MASTER = "master_"  # the prefix of the master's own fields
# The prefixes of the "+ New environment" / "+ New compute resource" panels' own fields:
# the panel holds every field the asset saves (the seed: name, Image URL, CREATE).
NEW_ENV = "new_environment_"
NEW_COMPUTE = "new_compute_"
POD_TEXT = ("image", "command", "args", "working_dir")
COMPUTE_FIELDS = (
    "gpu_devices",
    "gpu_request_type",
    "gpu_portion",
    "gpu_memory",
    "cpu_cores",
    "cpu_memory",
)
POD_FIELDS = ("environment", *POD_TEXT, "env", "compute", *COMPUTE_FIELDS)
FIELDS = (
    "project",
    "framework",
    "topology",
    "name",
    *POD_FIELDS,
    "new_environment_name",
    "new_compute_name",
    "workers",
    "backoff_limit",
    "preemptibility",
    "priority_class",
    "interactive",
    "master_differs",
    *(MASTER + f for f in POD_FIELDS),
    *(NEW_ENV + f for f in (*POD_TEXT, "env")),
    *(NEW_COMPUTE + f for f in COMPUTE_FIELDS),
)

# How the form calls its fields in messages and in the error summary.
LABELS = {
    "project": "Project",
    "framework": "Framework",
    "topology": "Workers & master",
    "name": "Name",
    "environment": "Environment",
    "image": "Image",
    "command": "Command",
    "args": "Arguments",
    "env": "Environment variables",
    "working_dir": "Working directory",
    "compute": "Compute resource",
    "gpu_devices": "GPU devices per pod",
    "gpu_request_type": "GPU request",
    "gpu_portion": "GPU portion (% of a device)",
    "gpu_memory": "GPU memory per device",
    "cpu_cores": "CPU cores per pod",
    "cpu_memory": "CPU memory per pod",
    "new_environment_name": "New environment's name",
    "new_compute_name": "New compute resource's name",
    "workers": "Workers",
    "backoff_limit": "Backoff limit",
    "preemptibility": "Preemptibility",
    "priority_class": "Priority class",
    "interactive": "Interactive",
    "master_differs": "Different master setup",
}

# The API's (camelCase) field -> the form's field, inside a pod spec.
_POD_WIRE = {
    "image": "image",
    "command": "command",
    "args": "args",
    "workingDir": "working_dir",
    "environmentVariables": "env",
    "compute": "gpu_devices",  # a compute-wide problem (the GPU request's shape)
    "cpuCoreRequest": "cpu_cores",
    "cpuMemoryRequest": "cpu_memory",
    "gpuDevicesRequest": "gpu_devices",
    "gpuRequestType": "gpu_request_type",
    "gpuPortionRequest": "gpu_portion",
    "gpuMemoryRequest": "gpu_memory",
}
_SPEC_WIRE = {
    **_POD_WIRE,
    "numWorkers": "workers",
    "backoffLimit": "backoff_limit",
    "preemptibility": "preemptibility",
    "priorityClass": "priority_class",
    "interactive": "interactive",
    "distributedFramework": "framework",
}


def base_of(field: str) -> str:
    """The field without its master or new-asset prefix (``master_image`` -> ``image``)."""
    for prefix in (MASTER, NEW_ENV, NEW_COMPUTE):
        if field.startswith(prefix) and field not in LABELS:
            return field.removeprefix(prefix)
    return field


_WHOSE = {MASTER: "Master: ", NEW_ENV: "New environment: ", NEW_COMPUTE: "New compute resource: "}


def label(field: str) -> str:
    """What the page calls ``field``, saying whose it is (``Master: Image``)."""
    base = base_of(field)
    text = LABELS.get(base, base.replace("_", " ").capitalize())
    if base == "image" and field.startswith(NEW_ENV):
        text = "Image URL"
    whose = next((w for p, w in _WHOSE.items() if field != base and field.startswith(p)), "")
    return whose + text


def field_for(loc: Sequence[str | int] | str | None) -> str:
    """The form field a pydantic ``loc`` or an ``InvalidSpec.where`` (``spec.command``)
    points at; "" when it is none of the form's."""
    if loc is None:
        return ""
    raw = loc.split(".") if isinstance(loc, str) else loc
    parts = [to_camel(p) for p in raw if isinstance(p, str)]  # python or wire names
    if not parts:
        return ""
    head, rest = parts[0], parts[1:]
    if head == "name":
        return "name"
    if head == "projectId":
        return "project"
    if head in ("spec", "masterSpec") and rest:
        table = _SPEC_WIRE if head == "spec" else _POD_WIRE
        key = rest[1] if rest[0] == "compute" and len(rest) > 1 else rest[0]
        field = table.get(key, "")
        return (MASTER + field if head == "masterSpec" else field) if field else ""
    return ""

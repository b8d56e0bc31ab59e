"""A stored workload as the CLI command and the API body that would submit it again.

Why: a user who set a workload up in the wizard (or got one from a colleague)
wants to script the next one; the page shows both, copyable.

Invariants:
- the API body is the stored spec (what ``POST /api/v1/workloads/distributed``
  accepted, camelCase), so POSTing it back gives an equal spec;
- the command is ``ringleader distributed submit`` (Run:ai v2: one flag per
  compute field, so nothing is lost in translation), every word quoted by
  ``shlex.join``: pasting it into a shell runs exactly it;
- a variable whose name says it holds a secret (the same words the API's
  422s redact: ``secret``, ``password``, ``token``) is never shown: its value
  is replaced in the summary, the command and the body alike.
"""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any

from ringleader.server.validation import SECRET_NAME

REDACTED = "<redacted>"
CLI = ["ringleader", "distributed", "submit"]

# The v2 compute flags: one per field of the API's compute block (cli/submit_flags.py).
_COMPUTE_FLAGS = {
    "gpuDevicesRequest": "--gpu-devices-request",
    "gpuRequestType": "--gpu-request-type",
    "gpuPortionRequest": "--gpu-portion-request",
    "gpuPortionLimit": "--gpu-portion-limit",
    "gpuMemoryRequest": "--gpu-memory-request",
    "gpuMemoryLimit": "--gpu-memory-limit",
    "cpuCoreRequest": "--cpu-core-request",
    "cpuCoreLimit": "--cpu-core-limit",
    "cpuMemoryRequest": "--cpu-memory-request",
    "cpuMemoryLimit": "--cpu-memory-limit",
}
_POD_FLAGS = {
    "slotsPerWorker": "--slots-per-worker",
    "backoffLimit": "--backoff-limit",
    "cleanPodPolicy": "--clean-pod-policy",
    "preemptibility": "--preemptibility",
    "priorityClass": "--priority",
}


def is_secret(name: str) -> bool:
    """True for a variable named like a secret (the API's own rule for its 422s)."""
    return bool(SECRET_NAME.search(name))


def redacted(spec: dict[str, Any]) -> dict[str, Any]:
    """The stored spec with the values of secret-named variables replaced."""
    out = copy.deepcopy(spec)
    for key in ("spec", "masterSpec"):
        pod = out.get(key)
        if isinstance(pod, dict):
            for variable in pod.get("environmentVariables") or []:
                if is_secret(str(variable.get("name", ""))) and variable.get("value"):
                    variable["value"] = REDACTED
    return out


def api_body(spec: dict[str, Any]) -> str:
    """The body of ``POST /api/v1/workloads/distributed`` that submits it again."""
    return json.dumps(redacted(spec), indent=2, ensure_ascii=False)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def cli_command(spec: dict[str, Any], project_name: str) -> str:
    """The ``ringleader distributed submit`` line that submits it again: a group of
    words a line, joined by backslash-newlines (a shell reads one command)."""
    body = redacted(spec)
    pod: dict[str, Any] = body.get("spec") or {}
    name = body.get("name", "")
    first = [*CLI, *(["--name-prefix", name] if body.get("useGivenNameAsPrefix") else [name])]
    first += ["-p", project_name]
    groups = [first, ["--framework", pod.get("distributedFramework", "PyTorch")]]
    groups[-1] += ["--workers", str(pod.get("numWorkers", 1))]
    if pod.get("image"):
        groups.append(["-i", pod["image"]])
    if pod.get("workingDir"):
        groups.append(["--working-dir", pod["workingDir"]])
    for variable in pod.get("environmentVariables") or []:
        groups.append(["-e", f"{variable.get('name', '')}={variable.get('value', '')}"])
    compute = [
        [flag, _number(value)]
        for field, flag in _COMPUTE_FLAGS.items()
        if (value := (pod.get("compute") or {}).get(field)) is not None
    ]
    groups += compute
    policies = [[flag, _number(pod[f])] for f, flag in _POD_FLAGS.items() if pod.get(f) is not None]
    if policies:
        groups.append([word for pair in policies for word in pair])
    if pod.get("nodePools"):
        groups.append(["--node-pools", ",".join(pod["nodePools"])])
    if pod.get("interactive"):
        groups.append(["--interactive"])
    command, args = pod.get("command"), pod.get("args")
    arg_words = shlex.split(args) if args else []
    if command:  # --command CMD: what follows -- is its arguments
        groups.append(["--command", command, *(["--", *arg_words] if arg_words else [])])
    elif arg_words and pod.get("image"):  # the image's own command's arguments
        groups.append(["--", *arg_words])
    elif arg_words:
        groups.append([f"--args={word}" for word in arg_words])
    line = " \\\n    ".join(shlex.join(group) for group in groups)
    if not body.get("masterSpecSameAsWorker", True) and body.get("masterSpec"):
        line += "\n# the master's own setup (masterSpec) has no flags: use the API body"
    return line

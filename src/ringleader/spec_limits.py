"""The bounds every submitted workload spec is checked against, and their checks.

Why apart from ``spec`` (the models): more than the workload spec checks these.
The API's asset schemas, the web UI's wizard, the backends and the CLI check or
read the same names, variables and memory quantities, and the tests the same
numbers, so each limit has one home that needs no model to import.

Invariants:
- pure data and checks, no I/O, no models: ``ValidationInfo`` only tells a spec
  read back from the database (whose bounds are not checked again, see
  ``WorkloadSpec.from_stored``) from one coming in;
- a check raises ``ValueError`` with a message a user can act on, and pydantic
  adds the field's name;
- the sizes keep one request's work on the server bounded, and every string
  short enough to reach a process's argv or environment.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import ValidationInfo

from ringleader.shellwords import split_command
from ringleader.textbounds import stored

NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # DNS-1123 label
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]i?|[kmgtp]|)[Bb]?\s*$")
_FACTORS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
# Upper bounds that keep the server's work per request bounded: one pod row per
# worker (plus the master) is written at admission, and a backend plans every rank.
MAX_WORKERS = 10_000
MAX_SLOTS_PER_WORKER = 1_024
MAX_GPUS_PER_POD = 1_024
# Strings, in characters.  Linux refuses an exec ("Argument list too long") when one
# argument string is over MAX_ARG_STRLEN (128 KiB) or argv plus the environment is over
# ARG_MAX (2 MiB with the default 8 MiB stack).  A command or its args may reach a pod
# as one word (`python -c '...'`), next to the pod's variables (at most 256 KiB) and
# ringleader's own: 32 Ki characters (32 KiB of ASCII) is a quarter of MAX_ARG_STRLEN,
# far more than a real training command needs, and cheap to store, list and show (a
# 200 KB command was accepted, then failed every restart with E2BIG).
MAX_COMMAND_CHARS = 32_768  # command, and args, each
MAX_ENV_VARS = 256  # per pod spec
MAX_ENV_NAME_CHARS = 256
MAX_ENV_VALUE_CHARS = 32_768
MAX_ENV_TOTAL_CHARS = 262_144  # names and values of one pod spec together
MAX_PATH_CHARS = 4_096  # workingDir (PATH_MAX)
MAX_IMAGE_CHARS = 1_024
MAX_ID_CHARS = 255  # projectId, clusterId, priorityClass
MAX_NODE_POOLS = 64

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What ringleader (the launcher, the backends, the scheduler) sets in every rank's
# environment: a spec setting one would break the gang's rendezvous or escape its
# GPU binding.  One list, used by the check below and shown in docs/users.md's "Limits".
RESERVED_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_NAME",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "NODE_RANK",
    "NNODES",
    "MASTER_ADDR",
    "MASTER_PORT",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "SLURM_PROCID",
    "RUNAI_MPI_NUM_WORKERS",
)
RESERVED_ENV_PREFIXES = (
    "RINGLEADER_",
    "TORCHELASTIC_",
    "PET_",
    "OMPI_COMM_WORLD_",
    "PMI_",
    "PMIX_",
)


def check_env_size(variables: list[Any]) -> None:
    """The bounds on one spec's variables (a workload's or an environment asset's): how
    many, and their names and values together (an asset's value may be None)."""
    if len(variables) > MAX_ENV_VARS:
        raise ValueError(f"at most {MAX_ENV_VARS} variables; this spec has {len(variables)}")
    total = sum(len(v.name) + len(v.value or "") for v in variables)
    if total > MAX_ENV_TOTAL_CHARS:
        raise ValueError(
            f"the variables' names and values add up to {total} characters; "
            f"at most {MAX_ENV_TOTAL_CHARS}"
        )


def check_env_name(name: str, info: ValidationInfo) -> str:
    """A variable a spec may set: a shell-style name, bounded, and none of those
    ringleader sets for every rank; a stored spec's name is not checked again."""
    if stored(info):
        return name
    if len(name) > MAX_ENV_NAME_CHARS:
        raise ValueError(f"at most {MAX_ENV_NAME_CHARS} characters; this one has {len(name)}")
    if not ENV_NAME_RE.match(name):
        raise ValueError(
            f"{name[:64]!r} is not a variable name: letters, digits and '_', "
            "not starting with a digit"
        )
    if name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIXES):
        raise ValueError(
            f"{name} is set by ringleader for every rank and cannot be set by the spec "
            f"(reserved: {', '.join(RESERVED_ENV)}, and {'*, '.join(RESERVED_ENV_PREFIXES)}*)"
        )
    return name


def check_command(text: str | None, info: ValidationInfo) -> str | None:
    """A command (or args) that splits into words; ValueError naming the problem."""
    if text is not None and not stored(info):
        try:
            split_command(text)
        except ValueError as exc:
            raise ValueError(f"cannot be split into words like a shell does: {exc}") from None
    return text


def parse_quantity(text: str) -> int:
    """Bytes in a Kubernetes/Run:ai memory string: ``100M``, ``4G``, ``1.5Gi``."""
    match = _QUANTITY.match(str(text))
    if not match:
        raise ValueError(f"not a memory quantity: {text!r} (examples: 100M, 4G, 1.5Gi)")
    number, unit = float(match.group(1)), match.group(2)
    factor = (
        1024 ** ("KMGTP".index(unit[0].upper()) + 1)
        if unit.endswith("i")
        else _FACTORS[unit.lower()]
    )
    if not math.isfinite(number * factor):  # 400 digits: a float overflows to inf
        raise ValueError(f"memory quantity too large: {text!r}")
    return int(number * factor)


def check_name(name: str) -> str:
    """A workload's (or an asset's) name: a DNS-1123 label, since it names the
    workload's pods (``NAME-worker-0``) on every backend and in a Kubernetes export."""
    if len(name) > 63 or not NAME_RE.match(name):
        raise ValueError(
            "must be a DNS-1123 label: lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return name

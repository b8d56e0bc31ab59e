"""The sbatch script ringleader writes, built by a pure function (no I/O).

Nomenclature: a *request* (``SbatchRequest``) is what the caller wants from Slurm
(nodes, tasks, resources, where output goes) plus the command the job runs; the
*script* is its rendering: ``#SBATCH`` lines, then a bash body that exports the
environment, runs the caller's trusted setup lines and ``exec``s the command.

Invariants:
- every value that reaches a ``#SBATCH`` line is checked to stay one directive
  (no newline, no NUL, no double quote; quoted when it holds a space or ``#``),
  so user input cannot add directives or shell lines;
- every value in the body is ``shlex.quote``'d, except ``setup_lines``, which the
  caller builds itself and vouches for;
- the same request renders the same script, byte for byte (golden tests).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "TIME_FORMS",
    "SbatchRequest",
    "render_script",
    "validate_extra_arg",
    "validate_signal",
    "validate_time",
]

TIME_FORMS = (
    "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or infinite/UNLIMITED (e.g. 90, 1:00:00, 2-0)"
)
MAX_VALUE = 1024  # longest #SBATCH value or --sbatch-arg accepted
_TIME = re.compile(r"(?:(?P<days>\d{1,4})-)?(?P<rest>\d{1,7}(?::\d{1,2}){0,2})")
_EXTRA_ARG = re.compile(r"--[a-z][a-z0-9-]*(=.*)?", re.DOTALL)
_SIGNAL = re.compile(r"([RB]{1,2}:)?(SIG)?[A-Z0-9]+(@\d+)?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Options that would change what ringleader follows or runs: one job, this script.
_REFUSED_EXTRA = {"--wrap", "--array", "--test-only", "--parsable", "--wait"}


@dataclass(frozen=True)
class SbatchRequest:
    """What to ask Slurm for, and the command the batch job runs."""

    job_name: str
    nodes: int
    command: tuple[str, ...]
    ntasks_per_node: int = 1
    cpus_per_task: int | None = None
    mem_per_node_mb: int | None = None
    gpus_per_node: int | None = None
    partition: str | None = None
    time: str | None = None
    account: str | None = None
    output: str | None = None
    chdir: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    extra_args: tuple[str, ...] = ()
    setup_lines: tuple[str, ...] = ()
    requeue: bool = False
    signal: str | None = None


def validate_time(text: str) -> str:
    """Slurm's ``--time`` forms, checked before submission; returns the value to pass.

    Minutes and seconds after the first field stay under 60, hours after a day
    under 24, as Slurm requires.  Raises ValueError naming ``--time`` and the forms.
    """
    value = text.strip()
    if value.lower() in ("infinite", "unlimited"):
        return value
    match = _TIME.fullmatch(value)
    if match:
        days, rest = match.group("days"), [int(p) for p in match.group("rest").split(":")]
        if all(part < 60 for part in rest[1:]) and (days is None or rest[0] < 24):
            return value
    raise ValueError(f"--time: {text!r} is not a Slurm time limit; use {TIME_FORMS}")


def validate_extra_arg(text: str) -> str:
    """One ``--sbatch-arg`` value: ``--name`` or ``--name=value``, one line.

    Raises ValueError naming ``--sbatch-arg`` and the expected form.
    """
    value = text.strip()
    if not _EXTRA_ARG.fullmatch(value) or len(value) > MAX_VALUE:
        raise ValueError(
            f"--sbatch-arg: {text!r} is not a long sbatch option; "
            "give one --name or --name=value per --sbatch-arg (e.g. --sbatch-arg=--exclusive)"
        )
    name, has_value, option_value = value.partition("=")
    if name in _REFUSED_EXTRA:
        raise ValueError(
            f"--sbatch-arg: {name} is not allowed: ringleader submits one job from its own "
            "script and follows it"
        )
    if has_value:
        _check_directive_value(option_value, "--sbatch-arg")
    return value


def validate_signal(text: str) -> str:
    """sbatch's ``--signal=[{R|B}:]SIG[@TIME]``."""
    if not _SIGNAL.fullmatch(text):
        raise ValueError(f"--signal: {text!r} is not [R|B:]SIGNAL[@SECONDS] (e.g. B:USR1@60)")
    return text


def render_script(req: SbatchRequest) -> str:
    """The batch script for ``req``: ``#SBATCH`` directives, then a bash body.

    Raises ValueError (naming the field) for a request that cannot be rendered
    safely: fewer than one node or task, an unsafe directive value, an empty command.
    """
    _check_counts(req)
    lines = ["#!/bin/bash"]
    for name, value in _directives(req):
        lines.append(f"#SBATCH --{name}" if value is None else f"#SBATCH --{name}={value}")
    for arg in req.extra_args:
        name, has_value, value = validate_extra_arg(arg).partition("=")
        lines.append(f"#SBATCH {name}={_directive_value(value, '--sbatch-arg')}"
                     if has_value else f"#SBATCH {name}")  # fmt: skip
    lines += ["# Written by ringleader: the job runs the command below on its first node.",
              "set -euo pipefail"]  # fmt: skip
    for key in sorted(req.env):
        if not _ENV_NAME.fullmatch(key):
            raise ValueError(f"env: {key!r} is not an environment variable name")
        lines.append(f"export {key}={shlex.quote(req.env[key])}")
    lines += list(req.setup_lines)
    lines.append("exec " + shlex.join(req.command))
    return "\n".join(lines) + "\n"


def _check_counts(req: SbatchRequest) -> None:
    for name, value in (("nodes", req.nodes), ("ntasks_per_node", req.ntasks_per_node)):
        if value < 1:
            raise ValueError(f"{name}: must be at least 1, got {value}")
    for name, maybe in (
        ("cpus_per_task", req.cpus_per_task),
        ("mem_per_node_mb", req.mem_per_node_mb),
        ("gpus_per_node", req.gpus_per_node),
    ):
        if maybe is not None and maybe < 0:
            raise ValueError(f"{name}: must not be negative, got {maybe}")
    if not req.command or not req.command[0]:
        raise ValueError("command: the job needs a command to run")


def _directives(req: SbatchRequest) -> list[tuple[str, str | None]]:
    """(option, value) in a fixed order; None for a flag without a value."""
    out: list[tuple[str, str | None]] = [
        ("job-name", _directive_value(req.job_name, "job_name")),
        ("nodes", str(req.nodes)),
        ("ntasks-per-node", str(req.ntasks_per_node)),
    ]
    if req.cpus_per_task:
        out.append(("cpus-per-task", str(req.cpus_per_task)))
    if req.mem_per_node_mb:
        out.append(("mem", f"{req.mem_per_node_mb}M"))
    if req.gpus_per_node:
        out.append(("gpus-per-node", str(req.gpus_per_node)))
    for name, maybe in (
        ("partition", req.partition),
        ("time", validate_time(req.time) if req.time else None),
        ("account", req.account),
        ("output", req.output),
        ("chdir", req.chdir),
    ):
        if maybe:
            out.append((name, _directive_value(maybe, name)))
    if req.requeue:
        out.append(("requeue", None))
    if req.signal:
        out.append(("signal", validate_signal(req.signal)))
    return out


def _check_directive_value(value: str, name: str) -> None:
    if any(ch in value for ch in '\n\r\0"') or len(value) > MAX_VALUE:
        raise ValueError(
            f"{name}: {value[:80]!r} cannot be an #SBATCH value "
            f"(no newline or double quote, at most {MAX_VALUE} characters)"
        )


def _directive_value(value: str, name: str) -> str:
    """``value`` as one ``#SBATCH`` word: sbatch reads a double-quoted word whole."""
    _check_directive_value(value, name)
    if not value:
        raise ValueError(f"{name}: must not be empty")
    return f'"{value}"' if any(ch.isspace() or ch == "#" for ch in value) else value

"""Registered SSH nodes: probing a host for what it offers, and reading the answer.

Nomenclature:
- *target*: what ``ssh`` is given (``user@host``, a name from ~/.ssh/config);
- *address*: what other nodes' ranks use to reach this one (the rendezvous);
- *probe*: ``cluster/probe.py node`` run over SSH with the server's own
  interpreter path (the one the backend will start agents with), so a node
  whose interpreter or ringleader is missing is found when it is added, not
  when a workload lands on it.

Invariants: a probe never prompts (BatchMode, host keys checked, as
everywhere); ``node_state`` is pure; a node whose interpreter lacks
ringleader is kept but NotReady, with the fix in its message.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from typing import Any

from ringleader.cluster.doctor import PROBE
from ringleader.errors import HostUnreachable
from ringleader.launch.container_runtime import RUNTIME_VAR, RUNTIMES
from ringleader.launch.ssh import SSHOptions, classify_failure, ssh_argv
from ringleader.server.inventory import RUNTIME_ERROR_FACT, RUNTIME_FACT

PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class NodeState:
    """What a probe's answer means for the ``nodes`` row."""

    cpu_cores: float
    memory_bytes: int
    gpus: list[dict[str, Any]]
    facts: dict[str, Any]
    ready: bool
    message: str


def probe_command(python: str, *args: str) -> str:
    """The remote command running the probe with ``python`` (quoted, one string); the
    runtime this server prefers (``--container-runtime``) goes along, so a node with
    both says the one its image pods will run with."""
    preferred = os.environ.get(RUNTIME_VAR)
    prefix = ["env", f"{RUNTIME_VAR}={preferred}"] if preferred in RUNTIMES else []
    return " ".join(shlex.quote(a) for a in (*prefix, python, "-c", PROBE, *args))


def probe_node(target: str, python: str, ssh: SSHOptions) -> dict[str, Any]:
    """The node's facts, or ``HostUnreachable`` naming the stage and the fix."""
    try:
        done = subprocess.run(
            ssh_argv(target, probe_command(python, "node"), ssh),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise HostUnreachable(
            target, "probe", f"no answer in {PROBE_TIMEOUT_S:g} s", "is the host up and idle?"
        ) from None
    if done.returncode == 255:
        stage, detail, fix = classify_failure(target, done.stderr)
        raise HostUnreachable(target, stage, detail, fix)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise HostUnreachable(
            target,
            "interpreter",
            f"{python} cannot run there ({last})",
            f"install the same Python at {python} on the host, then `ringleader install`",
        )
    try:
        facts = json.loads(lines[-1])
    except json.JSONDecodeError:
        raise HostUnreachable(target, "probe", f"unreadable answer: {lines[-1][:200]}") from None
    if not isinstance(facts, dict):
        raise HostUnreachable(target, "probe", f"unreadable answer: {lines[-1][:200]}")
    return facts


def node_state(facts: dict[str, Any], python: str, probed_at: float) -> NodeState:
    """Capacity, facts and readiness from a probe's answer (pure)."""
    gpus = [
        {
            "index": int(g["index"]),
            "model": str(g.get("model") or ""),
            "memoryBytes": int(g.get("memoryBytes") or 0),
        }
        for g in facts.get("gpus") or []
        if isinstance(g, dict) and "index" in g
    ]
    kept = {
        key: facts.get(key)
        for key in ("hostname", "os", "python", "python_version", "torch", "ringleader")
    }
    # "" is a fact too (no runtime: no image pods there); a node too old to say has none.
    kept[RUNTIME_FACT] = str(facts.get(RUNTIME_FACT) or "")
    if facts.get(RUNTIME_ERROR_FACT):  # installed but broken: why, for nodes list
        kept[RUNTIME_ERROR_FACT] = str(facts[RUNTIME_ERROR_FACT])
    kept["probed_at"] = probed_at
    message = (
        ""
        if facts.get("ringleader")
        else f"ringleader is not installed for {python} there: "
        "`ringleader install` (or pip install ringleader into that interpreter)"
    )
    return NodeState(
        cpu_cores=float(facts.get("cpu_cores") or 0),
        memory_bytes=int(facts.get("memory_bytes") or 0),
        gpus=gpus,
        facts=kept,
        ready=not message,
        message=message,
    )

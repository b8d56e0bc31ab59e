"""The detached supervisor's ``state.json`` as a ``BackendStatus``: the one table.

Nomenclature: *native phase* is the supervisor's (``Starting``, ``Running``,
``Restarting``, ``Stopping``, ``Succeeded``, ``Failed``, ``Stopped``); a
*pod* is Run:ai's view over the launcher's ranks (``LocalPod``).

Invariant: ``STATES`` is the only map from native phases to ours; anything it
does not name is Unknown (``Backend.phase_of``).  The only other rule here is
cleanPodPolicy None's: the master's success is the job's while other pods run on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ringleader.launch.detached import FINAL_PHASES
from ringleader.server.backends.base import BackendStatus, PodStatus
from ringleader.server.backends.local.planning import LocalPod

STATES: Mapping[str, str] = {
    "Starting": "Initializing",
    "Running": "Running",
    "Restarting": "Running",
    "Stopping": "Running",
    "Succeeded": "Completed",
    "Failed": "Failed",
    "Stopped": "Stopped",
}
MESSAGES = {
    "Starting": "starting the supervisor and its agent",
    "Restarting": "restarting the gang after a failure",
    "Stopping": "stopping the gang",
}


def pod_phase(rank_phases: list[str]) -> str:
    """A pod fails with any rank, runs while any runs, succeeds when all did."""
    if not rank_phases:
        return "Pending"
    for phase in ("Failed", "Running"):
        if phase in rank_phases:
            return phase
    if all(p == "Succeeded" for p in rank_phases):
        return "Succeeded"
    return "Stopped" if "Stopped" in rank_phases else "Unknown"


def pod_exit_code(ranks: list[dict[str, Any]]) -> int | None:
    """The failed rank's code, else the first non-zero one, else 0 (None: none ended)."""
    codes = [r["exit_code"] for r in ranks if r.get("exit_code") is not None]
    failed = [r["exit_code"] for r in ranks if r.get("phase") == "Failed"]
    return (failed or [c for c in codes if c] or codes or [None])[0]


def status_of(
    state: dict[str, Any],
    pods: list[LocalPod],
    *,
    this_node: str,
    phase_of: Any,
    on_rank0_success: str = "wait",
) -> BackendStatus:
    """``state`` (the supervisor's record) as our status; ``phase_of``: the table's lookup."""
    native = str(state.get("phase"))
    attempt = int(state.get("attempt") or 0)
    ranks: dict[str, dict[str, Any]] = state.get("ranks") or {}
    pod_states = []
    for pod in pods:
        infos = [ranks[str(r)] for r in pod.ranks if str(r) in ranks]
        phase = pod_phase([str(i.get("phase")) for i in infos])
        pod_states.append(
            PodStatus(
                name=pod.name,
                role=pod.role,
                index=pod.index,
                phase=phase,
                node=pod.node or this_node,
                exit_code=None if phase == "Running" else pod_exit_code(infos),
                attempt=attempt,
                ranks=tuple(r for r in pod.ranks if r >= 0),
            )
        )
    message = state.get("reason") or MESSAGES.get(native, "")
    summary = state.get("summary")
    if native == "Failed" and summary and summary != message:
        message = f"{message}\n{summary}"  # one line first, the root-cause text below it
    if native == "Restarting":
        message = f"{message} (attempt {attempt + 1} next)"
    rotated = rotation_note(state, pods)
    message = f"{message}\n{rotated}" if message and rotated else message or rotated
    phase = phase_of(native)
    master = (ranks.get("0") or {}).get("phase")
    if phase == "Running" and on_rank0_success == "leave-rest" and master == "Succeeded":
        running = [p.name for p in pod_states if p.phase == "Running"]
        phase = "Completed"  # the master's success is the job's; the rest run on
        message = (
            f"the master completed; {len(running)} pod(s) left running by cleanPodPolicy "
            f"None until they end or the workload is deleted: {', '.join(running)}"
        )
    pull, pulls = pull_progress(state)
    reason = pull if native == "Starting" else ""
    if reason:
        message = pulls
    return BackendStatus(
        phase=phase,
        message=message,
        attempt=attempt,
        pods=pod_states,
        exit_code=state.get("exit_code"),
        ended_at=ended_at(state),
        reason=reason,
        pulled=pulls if pull == "Pulled" else "",
        lasting=bool(state.get("lasting")),
    )


def pull_progress(state: dict[str, Any]) -> tuple[str, str]:
    """Kubernetes' words for an image on its way (``Pulling``, then ``Pulled`` once every
    host has it) and each host's latest line (the supervisor's ``progress``); ("", "")
    when no host pulls.  The server records an event each time the reason changes.

    Pulled waits for the launch to leave ``Starting`` (every agent ready): a host
    not heard from yet may still begin a pull, and one host done before another
    starts would otherwise read Pulled, Pulling, Pulled (two Pulled events)."""
    progress = state.get("progress")
    if not isinstance(progress, dict) or not progress:
        return "", ""
    lines, pulling = [], state.get("phase") == "Starting"
    for host, info in sorted(progress.items()):
        if isinstance(info, dict):
            pulling = pulling or not info.get("done")
            lines.append(f"{host}: {info.get('text', '')}")
    return ("Pulling" if pulling else "Pulled"), "\n".join(lines)


def rotation_note(state: dict[str, Any], pods: list[LocalPod]) -> str:
    """Which pods' logs passed the cap and were rotated (``logs_rotated``, written by the
    supervisor): their oldest output is gone, and the reader should know it."""
    rotated = state.get("logs_rotated")
    if not isinstance(rotated, dict) or not rotated:
        return ""
    owner = {r: p.name for p in pods for r in p.ranks}
    named, cap = [], 0
    for name, info in sorted(rotated.items()):
        if not isinstance(info, dict):
            continue
        rank, stream = info.get("rank"), info.get("stream")
        cap = info.get("max_bytes") if isinstance(info.get("max_bytes"), int) else cap
        label = f"{owner.get(rank, name)} {stream}" if isinstance(rank, int) else name
        if label not in named:
            named.append(label)
    return (
        f"logs rotated: {', '.join(named)} passed {cap} bytes (--max-log-bytes);"
        " only the newest output is kept"
    )


def ended_at(state: dict[str, Any]) -> float | None:
    """When a final ``state`` was reached: its ``ended_at``, else the time of its last
    write (the supervisor writes the final state once, when the gang has ended)."""
    if state.get("phase") not in FINAL_PHASES:
        return None
    for key in ("ended_at", "updated_at"):
        value = state.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None

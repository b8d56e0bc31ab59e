"""A Slurm job and its supervisor's record, as one ``BackendStatus`` (pure).

Two sources, each the authority on its own part:
- Slurm (``JobInfo``, from ``scontrol show job``) on where the job is: queued
  (and why), running on which nodes, taken back (preempted or requeued), or
  ended and how (CANCELLED, TIMEOUT, NODE_FAIL ...): the one table of
  ``ringleader.slurm.states`` maps its state to our phase;
- the in-job supervisor's ``state.json`` (``launch/detached.py``) on what the
  gang did: the starting phase, each rank's exit code, the root cause.

How they combine: queued or taken back -> Slurm alone; running -> the
supervisor's record (Starting is Initializing), Slurm's SUSPENDED/STOPPED as
Degraded; ended -> the phase from Slurm's state, the words from both (a
COMPLETED job is as the supervisor says: a failed gang makes the script exit
non-zero, so Slurm says FAILED).  A job Slurm forgot (past ``MinJobAge``) is
read from the supervisor's record alone.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ringleader.server.backends.base import BackendStatus, PodStatus
from ringleader.server.backends.local.planning import LocalPod
from ringleader.server.backends.local.status import STATES as SUPERVISOR_STATES
from ringleader.server.backends.local.status import status_of
from ringleader.slurm.commands import JobInfo
from ringleader.slurm.reasons import pending_reason
from ringleader.slurm.states import job_phase, job_words

PREEMPTED = "Preempted"


def pods_on(pods: list[LocalPod], nodes: list[str]) -> list[LocalPod]:
    """Each pod that runs ranks on its node of the job (pod I on node I, Slurm's order)."""
    ranked = [p for p in pods if any(r >= 0 for r in p.ranks)]
    where = {p.name: nodes[i] for i, p in enumerate(ranked) if i < len(nodes)}
    return [dataclasses.replace(p, node=where.get(p.name, "")) for p in pods]


def waiting_pods(pods: list[LocalPod], phase: str = "Pending") -> list[PodStatus]:
    return [
        PodStatus(p.name, p.role, p.index, phase, "", ranks=tuple(r for r in p.ranks if r >= 0))
        for p in pods
    ]


def _supervisor(
    state: dict[str, Any], pods: list[LocalPod], on_rank0_success: str
) -> BackendStatus:
    return status_of(
        state,
        pods,
        this_node="",
        phase_of=lambda native: SUPERVISOR_STATES.get(native, "Unknown"),
        on_rank0_success=on_rank0_success,
    )


def job_status(
    job_id: str,
    job: JobInfo | None,
    state: dict[str, Any] | None,
    pods: list[LocalPod],
    *,
    on_rank0_success: str = "wait",
    log_tail: str = "",
) -> BackendStatus:
    """Our status of Slurm job ``job_id`` (None: Slurm no longer knows it) whose
    supervisor wrote ``state`` (None: not yet, or never); ``log_tail``: the end of the
    job's own output, for a job that ended without a record of why."""
    final = state is not None and state.get("phase") in ("Succeeded", "Failed", "Stopped")
    if job is None:
        if state is not None and final:
            return _supervisor(state, pods, on_rank0_success)
        return BackendStatus(
            "Failed",
            message=f"Slurm no longer knows job {job_id} and its supervisor left no final "
            "record" + (f":\n{log_tail}" if log_tail else ""),
            pods=waiting_pods(pods, "Failed"),
        )
    native = job.state.value
    phase = job_phase(native, job.restarts)
    placed = pods_on(pods, job.nodes)
    if phase == "Pending":  # taken back: the server queues it again and resubmits it
        what = (
            f"was requeued by Slurm (restart {job.restarts}: preempted, or scontrol requeue)"
            if job.restarts
            else job_words(native)
        )
        return BackendStatus(
            "Pending",
            message=f"Slurm job {job_id} {what}; it is resubmitted from its last checkpoint",
            reason=PREEMPTED,
            pods=waiting_pods(placed, "Stopped"),
        )
    if phase == "Initializing":
        reason = job.reason or "Queued"
        return BackendStatus(
            "Initializing",
            message=f"Slurm job {job_id} is {native}: {pending_reason(job.reason)}",
            reason=reason,
            pods=waiting_pods(pods),
        )
    if phase in ("Running", "Degraded"):
        if state is None:
            nodes = ", ".join(job.nodes) or "its nodes"
            return BackendStatus(
                "Initializing",
                message=f"Slurm job {job_id} started on {nodes}; the supervisor is starting",
                reason="Starting",
                pods=waiting_pods(placed),
            )
        status = _supervisor(state, placed, on_rank0_success)
        if state.get("phase") == "Stopped":
            # Signalled from outside (scancel, the time limit, a requeue): Slurm's word on
            # why comes once the job has ended; until then it is still ending.
            return dataclasses.replace(
                status, phase="Running", message=f"Slurm job {job_id} is ending ({native})"
            )
        if phase == "Degraded" and status.phase == "Running":
            return dataclasses.replace(
                status, phase="Degraded", message=f"Slurm job {job_id} {job_words(native)}"
            )
        return status
    return _ended(job_id, job, state if final else None, placed, on_rank0_success, log_tail)


def _ended(
    job_id: str,
    job: JobInfo,
    state: dict[str, Any] | None,
    pods: list[LocalPod],
    on_rank0_success: str,
    log_tail: str,
) -> BackendStatus:
    """A job Slurm says ended: its phase from Slurm's state, the words from both."""
    native = job.state.value
    phase = job_phase(native)
    if state is not None:
        status = _supervisor(state, pods, on_rank0_success)
        if native in ("COMPLETED", "FAILED"):
            return status  # the supervisor's record is the whole story
        said = f"Slurm job {job_id} {job_words(native)}"
        message = f"{said}; {status.message}" if status.message else said
        return dataclasses.replace(status, phase=phase, message=message)
    # No final record: the supervisor was killed (TIMEOUT, OUT_OF_MEMORY, a lost node,
    # scancel's SIGKILL) or never started.
    said = f"Slurm job {job_id} {job_words(native)}"
    if job.exit_code:
        said += f" (exit code {job.exit_code})"
    ended = "Stopped" if phase == "Stopped" else "Failed"
    return BackendStatus(
        phase,
        message=said + (f":\n{log_tail}" if log_tail and phase != "Completed" else ""),
        pods=[
            PodStatus(
                p.name,
                p.role,
                p.index,
                "Succeeded" if phase == "Completed" else ended,
                p.node,
                exit_code=job.exit_code,
                ranks=tuple(r for r in p.ranks if r >= 0),
            )
            for p in pods
        ],
        exit_code=job.exit_code,
    )

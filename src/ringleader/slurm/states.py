"""Slurm's job and node states as ringleader's phases: one table each, pure.

Nomenclature:
- *job state*: ``JobState`` of ``scontrol show job`` (``squeue`` and ``sacct``
  spell them the same), its first word: ``CANCELLED by 0`` is CANCELLED;
- *phase*: a Run:ai workload phase name (``server/phases.py``); ``JOB_PHASES``
  gives the phase a job state means before anything else is known: the
  in-job supervisor's own record (``state.json``) refines a running job
  (Starting -> Initializing) and explains an ended one (exit codes, root cause);
- *taken back*: Slurm preempted or requeued the job (PREEMPTED, REQUEUED,
  REQUEUE_HOLD, REQUEUE_FED, or a job not ended with ``Restarts`` > 0: ringleader
  submits each job once, so a restart is Slurm's requeue).  It maps to
  ``Pending``: a polled workload reported Pending goes back to ringleader's
  queue (reason Preempted), the rest of the job is cancelled, and the next
  start resubmits it from its last checkpoint (Slurm's own requeue would wait
  ``BeginTime``, about two minutes, and bypass ringleader's admission);
- *node state*: ``State`` of ``scontrol show node``: a base state and
  ``+``-joined flags (``IDLE+DRAIN``, ``DOWN+NOT_RESPONDING``; sinfo's ``*``
  suffix is NOT_RESPONDING).

Invariant: anything a table does not name is ``Unknown`` (a job state Slurm
adds later) or NotReady (a node state), never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "JOB_PHASES",
    "TAKEN_BACK",
    "job_phase",
    "job_words",
    "node_ready",
    "taken_back",
]

UNKNOWN = "Unknown"

#: Slurm job state -> our workload phase (the one table; docs/slurm.md shows it).
JOB_PHASES: Mapping[str, str] = {
    "PENDING": "Initializing",  # admitted by ringleader, queued by Slurm (its reason shown)
    "CONFIGURING": "Initializing",  # nodes booting or being set up for it
    "RESV_DEL_HOLD": "Initializing",  # held: its reservation was deleted
    "RUNNING": "Running",
    "RESIZING": "Running",
    "SIGNALING": "Running",
    "STAGE_OUT": "Running",
    "COMPLETING": "Running",  # its processes end; the supervisor's record says how
    "SUSPENDED": "Degraded",  # scontrol suspend: its processes are stopped, nodes kept
    "STOPPED": "Degraded",  # SIGSTOPped, nodes kept
    "COMPLETED": "Completed",
    "FAILED": "Failed",
    "TIMEOUT": "Failed",
    "NODE_FAIL": "Failed",
    "OUT_OF_MEMORY": "Failed",
    "BOOT_FAIL": "Failed",
    "DEADLINE": "Failed",
    "SPECIAL_EXIT": "Failed",
    "REVOKED": "Failed",  # a federation sibling ran it instead
    "CANCELLED": "Stopped",  # scancel: asked by ringleader (a suspend) or from outside
    "PREEMPTED": "Pending",  # taken back: queued again, resumed from its checkpoint
    "REQUEUED": "Pending",
    "REQUEUE_HOLD": "Pending",
    "REQUEUE_FED": "Pending",
}
TAKEN_BACK = frozenset(s for s, phase in JOB_PHASES.items() if phase == "Pending")

#: Why an ended job ended, in words, for the workload's message.
_ENDED_WORDS: Mapping[str, str] = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "TIMEOUT": "reached its time limit (--time) and was killed",
    "NODE_FAIL": "lost a node (NODE_FAIL)",
    "OUT_OF_MEMORY": "ran out of memory (OUT_OF_MEMORY: raise cpuMemoryLimit)",
    "BOOT_FAIL": "could not boot its nodes (BOOT_FAIL)",
    "DEADLINE": "missed its deadline (--deadline)",
    "SPECIAL_EXIT": "was held after a special exit (SPECIAL_EXIT)",
    "REVOKED": "was revoked (another cluster of the federation runs it)",
    "CANCELLED": "was cancelled (scancel)",
    "PREEMPTED": "was preempted by Slurm",
    "REQUEUED": "was requeued by Slurm",
    "REQUEUE_HOLD": "was requeued and held by Slurm",
    "REQUEUE_FED": "was requeued by the federation",
    "SUSPENDED": "is suspended by Slurm (scontrol suspend): its processes are stopped",
    "STOPPED": "is stopped (SIGSTOP) and keeps its nodes",
}


def job_phase(state: str, restarts: int = 0) -> str:
    """Our phase for a Slurm job state (``restarts``: Slurm's requeue count)."""
    word = state.split()[0].upper() if state.strip() else ""
    phase = JOB_PHASES.get(word, UNKNOWN)
    if restarts > 0 and phase not in ("Completed", "Failed", "Stopped"):
        return "Pending"  # requeued (ringleader submits each job once): taken back
    return phase


def taken_back(state: str, restarts: int = 0) -> bool:
    """Whether Slurm preempted or requeued the job (see the module doc)."""
    return job_phase(state, restarts) == "Pending"


def job_words(state: str) -> str:
    """What happened to a job in ``state``, as the end of a sentence (``job 7 ...``)."""
    word = state.split()[0].upper() if state.strip() else ""
    return _ENDED_WORDS.get(word, f"is {word or 'in an unknown state'}")


# ----- nodes -----------------------------------------------------------------------
#: Base states whose node takes new work.
_READY_BASES = frozenset({"IDLE", "MIXED", "ALLOCATED", "COMPLETING", "PLANNED"})
#: Flags that keep a node from new work, with the words for its message.
_NOT_READY_FLAGS: Mapping[str, str] = {
    "DRAIN": "drained",
    "DRAINING": "draining",
    "DRAINED": "drained",
    "FAIL": "failed",
    "FAILING": "failing",
    "NOT_RESPONDING": "not responding",
    "MAINT": "in maintenance",
    "INVALID_REG": "registered with a configuration Slurm refuses",
    "REBOOT_ISSUED": "rebooting",
    "POWERING_DOWN": "powering down",
    "RESERVED": "reserved",
}


def node_ready(state: str, reason: str | None = None) -> tuple[bool, str]:
    """(ready, message) for a node's ``State`` (``IDLE+DRAIN``, ``IDLE*``) and ``Reason``.

    A node is Ready when its base state takes work and no flag keeps work off it;
    the message says why not, with Slurm's own reason when it has one.
    """
    text = state.strip().upper()
    parts = [p for p in text.replace("*", "+NOT_RESPONDING").split("+") if p]
    base, flags = (parts[0], parts[1:]) if parts else ("UNKNOWN", [])
    why = [_NOT_READY_FLAGS[f] for f in flags if f in _NOT_READY_FLAGS]
    if base not in _READY_BASES:
        why.insert(0, base.lower())
    if not why:
        return True, ""
    message = f"Slurm: {', '.join(dict.fromkeys(why))} ({state.strip()})"
    if reason:
        message += f": {reason}"
    return False, message

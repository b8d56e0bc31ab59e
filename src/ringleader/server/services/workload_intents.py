"""What suspend, resume and delete change of a workload, and when each may be asked.

Apart from ``workloads`` (which validates and records them, ``record_intent``)
because the rule of which intent a phase accepts is read by the API, the UI's
buttons and the stopping loop alike: one table, so the three never differ.  A
suspend and a resume each asked while the other's stop is under way change only
the wish (``desired_phase``); ``background.stopping.end_stop`` ends the stop as
the last one asked.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from ringleader.errors import Conflict
from ringleader.server import phases
from ringleader.server.backends import BackendSet
from ringleader.server.backends.base import check_suspendable
from ringleader.server.models import Workload

# The stops whose end reads the wish (``stopping.end_stop``): while one runs, a
# suspend or a resume changes only ``desired_phase``.
UNDER_WAY = ("Stopping", "Resuming")


def request_delete(session: Session, workload: Workload) -> None:
    workload.desired_phase = "Deleted"
    phases.transition(session, workload, "Deleting", reason="DeleteRequested")


def suspender(backends: BackendSet) -> Callable[[Session, Workload], None]:
    """``request_suspend``, refused (422) where the workload's backend cannot suspend."""

    def change(session: Session, workload: Workload) -> None:
        check_suspendable(backends.named(workload.backend))
        request_suspend(session, workload)

    return change


def may_suspend(phase: str, desired_phase: str) -> bool:
    """Whether a suspend can be recorded: the workload is active, or a stop or a
    resume is under way that would end it running (the user changed their mind)."""
    if phase in UNDER_WAY:
        return desired_phase == "Running"
    return "Stopping" in phases.WORKLOAD_TRANSITIONS.get(phase, ())


def may_resume(phase: str, desired_phase: str) -> bool:
    """Whether a resume can be recorded: the run ended stopped or failed, or a suspend
    is still stopping it (the resume is kept, and runs once the stop has ended)."""
    if phase in UNDER_WAY:
        return desired_phase == "Stopped"
    return "Resuming" in phases.WORKLOAD_TRANSITIONS.get(phase, ())


def request_suspend(session: Session, workload: Workload) -> None:
    """Stop the workload's pods and keep it, Stopped, to resume later.  While a stop
    or a resume is already under way only the wish changes: ``stopping.end_stop``
    ends it Stopped when its cancel returns, so ``suspend`` typed right after a
    ``resume`` is never refused for a phase the user cannot see."""
    if not may_suspend(workload.phase, workload.desired_phase):
        raise Conflict(
            f"workload {workload.name!r} is {workload.phase}; "
            "only an active workload can be suspended"
        )
    workload.desired_phase = "Stopped"
    if workload.phase not in UNDER_WAY:
        phases.transition(session, workload, "Stopping", reason="SuspendRequested")


def request_resume(session: Session, workload: Workload) -> None:
    """Start a Stopped or Failed workload again.  A suspend still stopping it keeps
    the resume: the stop ends Stopped, then resumes (``stopping.end_stop``)."""
    if not may_resume(workload.phase, workload.desired_phase):
        raise Conflict(
            f"workload {workload.name!r} is {workload.phase}; "
            "only a Stopped, Failed or stopping one can resume"
        )
    workload.desired_phase = "Running"
    if workload.phase not in UNDER_WAY:
        phases.transition(session, workload, "Resuming", reason="ResumeRequested")


#: The intents a user records on a workload, by the name the API's routes and the UI's
#: forms both use: one table, so the two never differ in what an action does.
INTENTS = ("suspend", "resume", "delete")


def intent(name: str, backends: BackendSet) -> Callable[[Session, Workload], None]:
    """What recording intent ``name`` (one of ``INTENTS``) changes of a workload."""
    return {
        "suspend": suspender(backends),
        "resume": request_resume,
        "delete": request_delete,
    }[name]

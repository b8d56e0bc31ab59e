"""A user's suspend and resume typed one after the other: the second is kept, never
refused for a phase the user cannot see, and the stop under way ends as the last
asked.  The services' intents and the stopping loop's end, on a real database."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.cli.show import status_lines
from ringleader.errors import Conflict
from ringleader.server.background.stopping import end_stop
from ringleader.server.models import Event, Pod, Project, Workload, new_id
from ringleader.server.phases import WORKLOAD_PHASES
from ringleader.server.schemas import WorkloadOut
from ringleader.server.services.workload_intents import (
    may_resume,
    may_suspend,
    request_delete,
    request_resume,
    request_suspend,
)


def _running(session: Session) -> Workload:
    workload = Workload(
        project=Project(name=f"p-{new_id()}"),
        name="train",
        spec={"command": "true"},
        framework="pytorch",
        phase="Running",
    )
    session.add(workload)
    session.add(Pod(workload=workload, name="train-master-0", role="master", index=0,
                    phase="Running"))  # fmt: skip
    session.flush()
    return workload


def _moves(session: Session, workload: Workload) -> list[tuple[str, str]]:
    session.flush()
    events = session.scalars(
        select(Event).where(Event.workload_id == workload.id).order_by(Event.id)
    )
    return [(e.to_phase, e.reason) for e in events if e.to_phase and e.pod_name is None]


def test_a_resume_asked_while_the_suspend_stops_it_runs_it_again(session: Session) -> None:
    workload = _running(session)
    request_suspend(session, workload)
    request_resume(session, workload)  # the stop is still under way
    assert (workload.phase, workload.desired_phase) == ("Stopping", "Running")
    end_stop(session, workload, "Stopping")  # the backend's cancel returned
    assert workload.phase == "Resuming"
    assert [p.phase for p in workload.pods] == ["Stopped"]
    end_stop(session, workload, "Resuming")
    assert workload.phase == "Pending"
    assert _moves(session, workload) == [
        ("Stopping", "SuspendRequested"),
        ("Stopped", "Suspended"),
        ("Resuming", "ResumeRequested"),
        ("Pending", "Resumed"),
    ]


def test_a_suspend_asked_while_the_resume_stops_the_last_run_ends_stopped(
    session: Session,
) -> None:
    workload = _running(session)
    request_suspend(session, workload)
    end_stop(session, workload, "Stopping")
    request_resume(session, workload)
    assert workload.phase == "Resuming"
    request_suspend(session, workload)
    assert (workload.phase, workload.desired_phase) == ("Resuming", "Stopped")
    end_stop(session, workload, "Resuming")
    assert workload.phase == "Stopped"
    assert _moves(session, workload)[-2:] == [
        ("Resuming", "ResumeRequested"),
        ("Stopped", "Suspended"),
    ]


def test_the_last_of_several_changes_of_mind_wins(session: Session) -> None:
    workload = _running(session)
    request_suspend(session, workload)
    request_resume(session, workload)
    request_suspend(session, workload)
    end_stop(session, workload, "Stopping")
    assert (workload.phase, workload.desired_phase) == ("Stopped", "Stopped")
    assert [m for m, _ in _moves(session, workload)] == ["Stopping", "Stopped"]


def test_what_would_change_nothing_is_refused_and_changes_nothing(session: Session) -> None:
    workload = _running(session)
    with pytest.raises(Conflict, match="only a Stopped, Failed or stopping one can resume"):
        request_resume(session, workload)  # it runs
    request_suspend(session, workload)
    with pytest.raises(Conflict, match="is Stopping; only an active workload"):
        request_suspend(session, workload)  # asked twice
    request_delete(session, workload)
    for ask in (request_suspend, request_resume):
        with pytest.raises(Conflict, match="is Deleting"):
            ask(session, workload)
    assert (workload.phase, workload.desired_phase) == ("Deleting", "Deleted")
    end_stop(session, workload, "Stopping")  # the suspend's cancel returns late
    assert workload.phase == "Deleting"  # the delete's own pass ends it


@pytest.mark.parametrize("phase", WORKLOAD_PHASES)
def test_the_pages_buttons_offer_what_the_services_accept(session: Session, phase: str) -> None:
    for desired in ("Running", "Stopped", "Deleted"):
        for may, ask in ((may_suspend, request_suspend), (may_resume, request_resume)):
            workload = _running(session)
            workload.phase, workload.desired_phase = phase, desired
            try:
                ask(session, workload)
                accepted = True
            except Conflict:
                accepted = False
            except Exception:  # a move the phase table refuses (IllegalTransition): 409
                accepted = False
            assert may(phase, desired) == accepted, (phase, desired, ask.__name__)


@pytest.mark.parametrize(
    ("actual", "desired", "shown"),
    [
        ("Stopping", "Running", "Status: Stopping   Desired: Running"),  # a resume waits
        ("Stopping", "Stopped", "Status: Stopping   Desired: Stopped"),
        ("Resuming", "Stopped", "Status: Resuming   Desired: Stopped"),  # a suspend waits
        ("Resuming", "Running", "Status: Resuming"),
        ("Running", "Running", "Status: Running"),
    ],
)
def test_describe_says_what_a_stop_under_way_will_end_as(
    actual: str, desired: str, shown: str
) -> None:
    fields = {"workloadId": "w1", "name": "train", "framework": "pytorch", "projectId": "p",
              "projectName": "default", "createdBy": None, "createdAt": "2026-11-30T00:00:00Z",
              "startedAt": None, "completedAt": None, "desiredPhase": desired,
              "actualPhase": actual, "phaseReason": "", "phaseMessage": "", "image": None,
              "requestedPods": 1, "runningPods": 0, "pendingPods": 0, "requestedGpus": 0,
              "allocatedGpus": 0, "attempt": 0, "spec": {}}  # fmt: skip
    workload = WorkloadOut.model_validate(fields)
    assert status_lines(workload, 80)[0] == shown

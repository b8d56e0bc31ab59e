"""One door for status: the transition tables, their events and their timestamps."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from unittest.mock import ANY

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from ringleader.errors import RingleaderError
from ringleader.server import db
from ringleader.server.migrate import upgrade
from ringleader.server.models import Event, Pod, Project, Workload, new_id
from ringleader.server.phases import (
    POD_PHASES,
    POD_TRANSITIONS,
    WORKLOAD_PHASES,
    WORKLOAD_TRANSITIONS,
    IllegalTransition,
    count_attempts,
    end_attempt,
    note_pending,
    observe,
    observed_move,
    record_event,
    restart_pod,
    transition,
    transition_pod,
)
from tests.fixtures.postgres import db_url, pg_url, postgres_server  # noqa: F401

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
ALLOWED = [(a, b) for a, targets in WORKLOAD_TRANSITIONS.items() for b in sorted(targets)]
REFUSED = [
    (a, b)
    for a in WORKLOAD_PHASES
    for b in WORKLOAD_PHASES
    if b != a and b not in WORKLOAD_TRANSITIONS[a]
]
POD_ALLOWED = [(a, b) for a, targets in POD_TRANSITIONS.items() for b in sorted(targets)]
POD_REFUSED = [
    (a, b) for a in POD_PHASES for b in POD_PHASES if b != a and b not in POD_TRANSITIONS[a]
]


class Clock:
    """An injected clock: each call to ``tick`` moves one minute on."""

    def __init__(self) -> None:
        self.now = T0

    def tick(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


def _workload(session: Session, phase: str = "Creating") -> Workload:
    workload = Workload(
        project=Project(name=f"p-{new_id()}"),
        name="train",
        spec={"command": "true"},
        framework="pytorch",
        phase=phase,
    )
    session.add(workload)
    session.flush()
    return workload


def _pod(session: Session, workload: Workload, phase: str = "Pending") -> Pod:
    pod = Pod(workload=workload, name="train-master-0", role="master", index=0, phase=phase)
    session.add(pod)
    session.flush()
    return pod


def _events(session: Session, workload: Workload) -> list[Event]:
    session.flush()
    return list(
        session.scalars(select(Event).where(Event.workload_id == workload.id).order_by(Event.id))
    )


def test_the_tables_name_only_known_phases() -> None:
    assert set(WORKLOAD_PHASES) == {
        "Creating", "Pending", "Initializing", "Running", "Degraded", "Completed", "Failed",
        "Stopping", "Stopped", "Deleting", "Deleted", "Resuming", "Unknown",
    }  # fmt: skip
    for targets in WORKLOAD_TRANSITIONS.values():
        assert targets <= set(WORKLOAD_PHASES)
    for targets in POD_TRANSITIONS.values():
        assert targets <= set(POD_PHASES)
    assert WORKLOAD_TRANSITIONS["Deleted"] == frozenset()
    assert all(not POD_TRANSITIONS[p] for p in ("Succeeded", "Failed", "Stopped"))


@pytest.mark.parametrize(("from_phase", "to_phase"), ALLOWED)
def test_every_allowed_workload_transition_writes_one_event(
    session: Session, from_phase: str, to_phase: str
) -> None:
    workload = _workload(session, from_phase)
    at = T0 + timedelta(hours=1)
    assert transition(session, workload, to_phase, reason="Why", message="what", now=at)
    assert (workload.phase, workload.phase_reason, workload.phase_message) == (
        to_phase,
        "Why",
        "what",
    )
    assert workload.updated_at == at
    [event] = _events(session, workload)
    assert (event.type, event.from_phase, event.to_phase) == ("PhaseChanged", from_phase, to_phase)
    assert (event.reason, event.message, event.time, event.pod_name) == ("Why", "what", at, None)


@pytest.mark.parametrize(("from_phase", "to_phase"), REFUSED)
def test_a_refused_workload_transition_raises_and_writes_nothing(
    session: Session, from_phase: str, to_phase: str
) -> None:
    workload = _workload(session, from_phase)
    before = workload.updated_at
    with pytest.raises(IllegalTransition) as caught:
        transition(session, workload, to_phase, reason="Why", now=T0)
    assert isinstance(caught.value, RingleaderError)
    assert (caught.value.from_phase, caught.value.to_phase) == (from_phase, to_phase)
    assert workload.id in caught.value.what and f"{from_phase} -> {to_phase}" in str(caught.value)
    assert (workload.phase, workload.phase_reason, workload.updated_at) == (from_phase, "", before)
    assert _events(session, workload) == []


def test_an_unknown_phase_name_is_refused(session: Session) -> None:
    with pytest.raises(IllegalTransition):
        transition(session, _workload(session, "Running"), "Finished")


def test_moving_to_the_current_phase_is_a_no_op(session: Session) -> None:
    workload = _workload(session, "Running")
    before = workload.updated_at
    assert transition(session, workload, "Running", reason="Again", now=T0) is False
    assert (workload.phase_reason, workload.updated_at) == ("", before)
    assert _events(session, workload) == []


def test_times_are_stamped_from_the_injected_clock(session: Session) -> None:
    clock = Clock()
    workload = _workload(session)
    for phase in ("Pending", "Running"):
        transition(session, workload, phase, now=clock.tick())
    first_run = clock.now
    assert workload.started_at == first_run and workload.completed_at is None
    transition(session, workload, "Degraded", now=clock.tick())
    transition(session, workload, "Running", now=clock.tick())
    assert workload.started_at == first_run  # the first Running only
    transition(session, workload, "Failed", now=clock.tick())
    failed_at = clock.now
    assert workload.completed_at == failed_at and workload.updated_at == failed_at
    transition(session, workload, "Resuming", now=clock.tick())
    assert workload.completed_at is None  # a resumed run has not ended
    for phase in ("Pending", "Running", "Stopping", "Stopped"):
        transition(session, workload, phase, now=clock.tick())
    stopped_at = clock.now
    assert workload.completed_at == stopped_at
    transition(session, workload, "Deleting", now=clock.tick())
    transition(session, workload, "Deleted", now=clock.tick())
    assert workload.completed_at == stopped_at  # Deleted keeps the time the run ended
    assert workload.deleted_at == clock.now
    events = _events(session, workload)
    assert [e.to_phase for e in events] == [
        "Pending", "Running", "Degraded", "Running", "Failed", "Resuming", "Pending",
        "Running", "Stopping", "Stopped", "Deleting", "Deleted",
    ]  # fmt: skip
    assert [e.time for e in events] == [T0 + timedelta(minutes=i) for i in range(1, 13)]


def test_deleting_a_workload_that_never_ended_stamps_its_end(session: Session) -> None:
    workload = _workload(session, "Running")
    transition(session, workload, "Deleting", now=T0)
    transition(session, workload, "Deleted", now=T0 + timedelta(seconds=5))
    assert workload.completed_at == workload.deleted_at == T0 + timedelta(seconds=5)


def test_completion_stamps_completed_at(session: Session) -> None:
    workload = _workload(session, "Running")
    transition(session, workload, "Completed", reason="Succeeded", now=T0)
    assert workload.completed_at == T0 and workload.phase_reason == "Succeeded"


def test_naive_clock_values_are_refused(session: Session) -> None:
    workload = _workload(session, "Pending")
    with pytest.raises(ValueError, match="naive"):
        transition(session, workload, "Running", now=datetime(2026, 3, 1))
    assert workload.phase == "Pending"


def test_transitions_never_commit(engine: Engine) -> None:
    sessions = db.session_factory(engine)
    with sessions() as s:
        workload = _workload(s, "Pending")
        s.commit()
        workload_id = workload.id
        transition(s, workload, "Running", now=T0)
        record_event(s, workload, "Submitted", now=T0)
        s.rollback()  # the caller's decision: phase and events go together
    with sessions() as s:
        workload = s.get(Workload, workload_id)
        assert workload.phase == "Pending"
        assert _events(s, workload) == []
        s.delete(workload)
        s.commit()


@pytest.mark.parametrize(("from_phase", "to_phase"), POD_ALLOWED)
def test_every_allowed_pod_transition_writes_one_event(
    session: Session, from_phase: str, to_phase: str
) -> None:
    workload = _workload(session, "Running")
    pod = _pod(session, workload, from_phase)
    assert transition_pod(session, pod, to_phase, reason="Why", now=T0)
    assert pod.phase == to_phase and pod.updated_at == T0
    [event] = _events(session, workload)
    assert (event.type, event.pod_name) == ("PodPhaseChanged", "train-master-0")
    assert (event.from_phase, event.to_phase, event.reason) == (from_phase, to_phase, "Why")


@pytest.mark.parametrize(("from_phase", "to_phase"), POD_REFUSED)
def test_a_refused_pod_transition_raises_and_writes_nothing(
    session: Session, from_phase: str, to_phase: str
) -> None:
    workload = _workload(session, "Running")
    pod = _pod(session, workload, from_phase)
    with pytest.raises(IllegalTransition):
        transition_pod(session, pod, to_phase, now=T0)
    assert pod.phase == from_phase
    assert _events(session, workload) == []


def test_pod_times_exit_codes_and_restarts(session: Session) -> None:
    clock = Clock()
    workload = _workload(session, "Running")
    pod = _pod(session, workload)
    assert transition_pod(session, pod, "Pending", now=clock.tick()) is False
    transition_pod(session, pod, "Running", now=clock.tick())
    assert pod.started_at == clock.now and pod.completed_at is None
    pod.node = "node-1"
    transition_pod(session, pod, "Failed", exit_code=3, reason="Error", now=clock.tick())
    assert (pod.exit_code, pod.completed_at) == (3, clock.now)
    restart_pod(session, pod, attempt=1, reason="Restarted", now=clock.tick())
    assert (pod.phase, pod.attempt, pod.exit_code, pod.node) == ("Pending", 1, None, "")
    assert pod.started_at is None and pod.completed_at is None
    transition_pod(session, pod, "Running", now=clock.tick())
    assert pod.started_at == clock.now
    events = _events(session, workload)
    assert [(e.type, e.from_phase, e.to_phase) for e in events] == [
        ("PodPhaseChanged", "Pending", "Running"),
        ("PodPhaseChanged", "Running", "Failed"),
        ("PodRestarted", "Failed", "Pending"),
        ("PodPhaseChanged", "Pending", "Running"),
    ]
    assert events[1].message == "exit code 3" and events[2].message == "attempt 1"


def test_record_event_adds_a_non_phase_event(session: Session) -> None:
    workload = _workload(session, "Running")
    event = record_event(
        session, workload, "Preempted", reason="Quota", message="by p2", pod_name="w-0", now=T0
    )
    assert _events(session, workload) == [event]
    assert (event.from_phase, event.to_phase, event.time) == (None, None, T0)
    assert (event.reason, event.message, event.pod_name) == ("Quota", "by p2", "w-0")


def test_a_whole_life_on_both_databases(db_url: str) -> None:  # noqa: F811
    """Phase, times and history survive a real commit and come back aware, in order."""
    upgrade(db_url)
    engine = db.make_engine(db_url)
    sessions: sessionmaker[Session] = db.session_factory(engine)
    clock = Clock()
    try:
        with sessions() as s, s.begin():
            workload = _workload(s)
            record_event(s, workload, "Submitted", now=clock.tick())
            pod = _pod(s, workload)
        for phase in ("Pending", "Initializing", "Running", "Completed"):
            with sessions() as s, s.begin():
                w = s.get(Workload, workload.id)
                transition(s, w, phase, reason=phase, now=clock.tick())
                if phase == "Running":
                    transition_pod(s, s.get(Pod, pod.id), "Running", now=clock.now)
                if phase == "Completed":
                    transition_pod(s, s.get(Pod, pod.id), "Succeeded", exit_code=0, now=clock.now)
        with sessions() as s:
            w = s.get(Workload, workload.id)
            assert w.phase == "Completed"
            assert w.started_at == T0 + timedelta(minutes=4)
            assert w.completed_at == clock.now and w.completed_at.tzinfo is timezone.utc
            assert [(e.type, e.to_phase, e.pod_name) for e in w.events] == [
                ("Submitted", None, None),
                ("PhaseChanged", "Pending", None),
                ("PhaseChanged", "Initializing", None),
                ("PhaseChanged", "Running", None),
                ("PodPhaseChanged", "Running", "train-master-0"),
                ("PhaseChanged", "Completed", None),
                ("PodPhaseChanged", "Succeeded", "train-master-0"),
            ]
            assert w.pods[0].exit_code == 0 and w.pods[0].completed_at == clock.now
    finally:
        engine.dispose()


# ----- what a backend observed: the door decides ----------------------------------


@pytest.mark.parametrize("current", ["Initializing", "Running", "Degraded", "Unknown"])
def test_an_unasked_stopped_ends_the_run_failed_with_its_reason(
    session: Session, current: str
) -> None:
    workload = _workload(session, current)
    assert observed_move(workload.phase, "Stopped") == ("Failed", "StoppedOutside", ANY)
    assert observe(session, workload, "Stopped", message="supervisor said so", now=T0)
    assert (workload.phase, workload.phase_reason) == ("Failed", "StoppedOutside")
    assert "nobody asked ringleader to stop it" in workload.phase_message
    assert workload.phase_message.endswith(": supervisor said so")
    assert workload.completed_at == T0


def test_an_allowed_observation_moves_and_others_change_nothing(session: Session) -> None:
    running = _workload(session, "Running")
    assert observe(session, running, "Completed", message="done", now=T0)
    assert (running.phase, running.phase_reason, running.phase_message) == (
        "Completed", "Completed", "done"
    )  # fmt: skip
    # A lingering Completed workload whose backend still says Running: kept.
    assert observed_move(running.phase, "Running") is None
    assert observe(session, running, "Running", now=T0) is False
    assert running.phase == "Completed" and len(_events(session, running)) == 1


def test_attempts_and_pending_reasons_change_only_through_the_door(session: Session) -> None:
    workload = _workload(session, "Running")
    count_attempts(workload, 2)
    count_attempts(workload, 1)  # only grows
    assert workload.attempt == 2
    end_attempt(session, workload, "rank 1 failed\ntraceback", "Failed", backoff_limit=3)
    assert (workload.phase, workload.attempt) == ("Pending", 3)
    assert "attempt 4 of 4" in workload.phase_message
    note_pending(session, workload, "Unschedulable", "needs 2 GPUs, 1 free")
    note_pending(session, workload, "Unschedulable", "needs 2 GPUs, 0 free")
    assert workload.phase_message == "needs 2 GPUs, 0 free"
    assert [e.type for e in _events(session, workload)].count("Unschedulable") == 1
    transition(session, workload, "Initializing", now=T0)
    transition(session, workload, "Running", now=T0)
    end_attempt(session, workload, "rank 1 failed\ntraceback", "Failed", backoff_limit=3)
    assert workload.phase == "Failed"
    assert workload.phase_message == ("rank 1 failed; no restarts left (backoffLimit 3)\ntraceback")

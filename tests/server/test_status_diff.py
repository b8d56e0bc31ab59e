"""One reconcile decision (``background/status_diff.py``): a poll's diff is false exactly
when applying it writes nothing, over every workload phase, pod phase and report."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from ringleader.server import db
from ringleader.server.backends.base import BackendStatus, PodStatus
from ringleader.server.background.status_diff import apply_diff, status_diff
from ringleader.server.models import Pod, Project, Workload, new_id
from ringleader.server.phases import IllegalTransition

WORKLOAD_PHASES = ["Pending", "Initializing", "Running", "Degraded", "Completed", "Failed"]
REPORTS = ["Initializing", "Running", "Completed", "Failed", "Stopped"]
POD_PHASES = ["Pending", "Running", "Succeeded", "Failed", "Stopped"]


def _written(session: Session) -> bool:
    """Whether the session holds anything to write (new, changed or deleted rows)."""
    changed = [o for o in session.dirty if session.is_modified(o)]
    return bool(session.new or changed or session.deleted)


def _case(session: Session, phase: str, pod_phase: str) -> Workload:
    workload = Workload(
        project=Project(name=f"p-{new_id()}"), name="train", spec=SPEC,
        framework="pytorch", phase=phase, phase_reason="Resources", phase_message="waits",
    )  # fmt: skip
    pod = Pod(workload=workload, name="train-master-0", role="master", index=0,
              phase=pod_phase, node="n1", ranks=[0])  # fmt: skip
    session.add_all([workload, pod])
    session.flush()
    session.expire_all()
    return session.get(Workload, workload.id)  # type: ignore[return-value]


SPEC = {
    "name": "train",
    "projectId": "p",
    "spec": {"command": "true", "numWorkers": 1, "backoffLimit": 1},
}
CASES = list(itertools.product(WORKLOAD_PHASES, POD_PHASES, REPORTS, POD_PHASES, [0, 1]))


@pytest.mark.parametrize("in_place", [True, False])
def test_a_diff_is_false_exactly_when_applying_it_writes_nothing(
    engine: Engine, in_place: bool
) -> None:
    disagree = []
    for phase, pod_phase, report, pod_report, attempt in CASES:
        with db.session_factory(engine)() as session:
            workload = _case(session, phase, pod_phase)
            reason = "Resources" if report == phase else ""
            ps = PodStatus("train-master-0", "master", 0, pod_report, "n1", attempt=attempt,
                           ranks=(0,), exit_code=1 if pod_report == "Failed" else None)  # fmt: skip
            status = BackendStatus(report, "waits", attempt=attempt, pods=[ps], reason=reason)
            diff = status_diff(workload, status, in_place)
            assert not _written(session)  # the diff itself writes nothing
            flushed: list[bool] = []

            def before_flush(s: Session, *_: object, seen: list[bool] = flushed) -> None:
                seen.append(_written(s))

            event.listen(session, "before_flush", before_flush)
            try:
                apply_diff(session, workload, status, diff)
            except IllegalTransition:  # a report no pod can make (Running -> Pending)
                session.rollback()
                continue
            wrote = any(flushed) or _written(session)
            if bool(diff) != wrote:
                disagree.append((phase, pod_phase, report, pod_report, attempt, bool(diff), wrote))
            session.rollback()
    assert not disagree, disagree[:10]


def _events(session: Session, workload: Workload) -> list[tuple[str, str]]:
    session.flush()
    session.refresh(workload)
    return [(e.type, e.message) for e in sorted(workload.events, key=lambda e: e.id)]


def test_an_image_pull_is_told_as_pulling_then_pulled(engine: Engine) -> None:
    """Each poll of a pull keeps the message current; an event marks Pulling once."""
    with db.session_factory(engine)() as session:
        workload = _case(session, "Initializing", "Pending")
        workload.phase_reason, workload.phase_message = "", ""
        for text in ("pulling image i", "pulling image i: layer 1 (52d32e69cb63), 3 s"):
            status = BackendStatus("Initializing", f"h1: {text}", reason="Pulling")
            apply_diff(session, workload, status, status_diff(workload, status, True))
        assert workload.phase_message == "h1: pulling image i: layer 1 (52d32e69cb63), 3 s"
        assert _events(session, workload) == [("Pulling", "h1: pulling image i")]
        done = "h1: pulled image i in 4.0 s (310 MB)"
        status = BackendStatus("Initializing", done, reason="Pulled", pulled=done)
        apply_diff(session, workload, status, status_diff(workload, status, True))
        assert _events(session, workload)[-1] == ("Pulled", done)
        session.rollback()


def test_a_pull_no_poll_saw_is_still_recorded_as_pulled_before_it_runs(
    engine: Engine,
) -> None:
    with db.session_factory(engine)() as session:
        workload = _case(session, "Initializing", "Pending")
        done = "h1: pulled image i in 0.4 s (2 MB)\nh2: pulled image i in 0.5 s (2 MB)"
        ps = PodStatus("train-master-0", "master", 0, "Running", "n1", ranks=(0,))
        status = BackendStatus("Running", "", pods=[ps], pulled=done)
        diff = status_diff(workload, status, True)
        assert diff.pulled_late
        apply_diff(session, workload, status, diff)
        types = [t for t, _ in _events(session, workload)]
        assert types.index("Pulled") < len(types) - 1 and workload.phase == "Running"
        assert ("Pulled", done) in _events(session, workload)
        # Once recorded (or once it runs), a poll says it no more.
        assert not status_diff(workload, status, True).pulled_late
        session.rollback()


@pytest.mark.parametrize("lasting", [False, True])
def test_a_gang_whose_image_cannot_be_had_fails_at_once_not_restarted(
    engine: Engine, lasting: bool
) -> None:
    """A gang the server placed failed before any rank: restarted on the nodes that
    answer, unless the backend says a restart would meet the same (its image cannot be
    pulled on any node), which fails the workload at once with that said."""
    why = "no rank was started: host n1: image: cannot pull image x: manifest unknown"
    with db.session_factory(engine)() as session:
        workload = _case(session, "Initializing", "Pending")
        ps = PodStatus("train-master-0", "master", 0, "Failed", "n1", ranks=(0,), exit_code=1)
        status = BackendStatus("Failed", why, pods=[ps], lasting=lasting)
        apply_diff(session, workload, status, status_diff(workload, status, False))
        session.flush()
        if lasting:
            assert (workload.phase, workload.attempt) == ("Failed", 0)
            assert workload.phase_message == f"{why}; not restarted: a restart would meet the same"
        else:
            assert (workload.phase, workload.attempt) == ("Pending", 1)
            assert "restarting on the nodes that answer" in workload.phase_message


def test_an_ended_pod_keeps_its_end_when_a_later_poll_words_it_otherwise(engine: Engine) -> None:
    """Slurm: the supervisor recorded a pod Failed, then was killed before its final
    record; the job's end (CANCELLED) calls every pod Stopped.  The poll still ends the
    workload (it once raised an illegal pod change on every poll, and stayed Running)."""
    with db.session_factory(engine)() as session:
        workload = _case(session, "Running", "Failed")
        ps = PodStatus("train-master-0", "master", 0, "Stopped", "n1", ranks=(0,), exit_code=9)
        status = BackendStatus("Stopped", "Slurm job 2 was cancelled (scancel)", pods=[ps])
        diff = status_diff(workload, status, True)
        assert diff and not any(diff.pods)
        apply_diff(session, workload, status, diff)
        session.flush()
        assert (workload.phase, workload.pods[0].phase) == ("Failed", "Failed")
        assert "was cancelled (scancel)" in workload.phase_message
        session.rollback()

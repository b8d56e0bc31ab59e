"""Two writers of one workload on PostgreSQL (where, unlike SQLite's one writer, their
transactions overlap): a background write decided on a phase it read before a user's
intent committed never overwrites that intent, nor an intent a background change
committed meanwhile. Found in a suite run: a poll's Running written over a delete's
Deleting left a deleted workload running for good (desired Deleted, phase Running,
no pipeline acting on it)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from ringleader.server import auth, phases
from ringleader.server.background.pipeline import act
from ringleader.server.models import User, Workload
from ringleader.server.services import users
from ringleader.server.services import workload_intents as intents
from ringleader.server.services import workloads as svc
from tests.conftest import wait_until
from tests.helpers.workloads_page import insert, researcher
from tests.server.conftest import API

POSTGRESQL_ONLY = pytest.mark.parametrize("api", ["postgresql"], indirect=True)


def waiting_on_a_lock(api: API) -> bool:
    """Whether a connection of the test's database waits on a row lock now."""
    with api.client.app.state.readers() as s:
        return bool(
            s.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
            )
        )


def while_held(
    api: API,
    hold: Callable[[Session], None],
    other: Callable[[], None],
    then: Callable[[Session], None] = lambda s: None,
) -> None:
    """``hold`` changes a row in an open transaction; ``other`` runs on a thread until
    it waits on that row's lock; then the transaction does ``then`` and commits, and
    ``other`` finishes."""
    with api.client.app.state.sessions() as s:
        s.begin()
        hold(s)
        s.flush()  # the row's lock taken; nothing committed
        failed: list[BaseException] = []

        def run() -> None:
            try:
                other()
            except BaseException as exc:
                failed.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        try:
            wait_until(lambda: waiting_on_a_lock(api) or not thread.is_alive(), 30, "a lock wait")
            then(s)
        finally:
            s.commit()
            thread.join(30)
    assert not thread.is_alive() and not failed, failed


def phase_of(api: API, workload_id: str) -> tuple[str, str]:
    with api.client.app.state.readers() as s:
        w = s.get(Workload, workload_id)
        return w.phase, w.desired_phase


@POSTGRESQL_ONLY
def test_a_poll_that_read_before_a_delete_committed_does_not_undo_it(api: API) -> None:
    (workload_id,) = insert(api, [{"name": "racing", "phase": "Initializing"}])
    world = SimpleNamespace(sessions=api.client.app.state.sessions)  # all ``act`` uses
    seen: list[str] = []

    def delete(s: Session) -> None:
        intents.request_delete(s, s.get(Workload, workload_id))

    def poll_says_running(s: Session, w: Workload) -> None:  # as apply_diff's observe
        seen.append(w.phase)
        if w.phase in phases.POLLED:
            phases.transition(s, w, "Running", reason="Running")

    while_held(api, delete, lambda: act(world, workload_id, poll_says_running))  # type: ignore[arg-type]
    assert seen == ["Deleting"]  # it read the row as the delete left it
    assert phase_of(api, workload_id)[1] == "Deleted"
    assert phase_of(api, workload_id)[0] in ("Deleting", "Deleted")  # never Running again


@POSTGRESQL_ONLY
def test_a_suspend_that_read_before_a_completion_committed_does_not_undo_it(api: API) -> None:
    (workload_id,) = insert(api, [{"name": "ending", "phase": "Running"}])
    with api.client.app.state.readers() as s:
        admin = s.query(User).filter_by(is_admin=True).one()
        s.expunge(admin)

    def completes(s: Session) -> None:  # the reconciler's write, not yet committed
        phases.transition(s, s.get(Workload, workload_id), "Completed", reason="Completed")

    def suspend() -> None:
        with api.client.app.state.sessions() as s:
            svc.record_intent(s, admin, workload_id, intents.request_suspend)

    refused: list[Exception] = []

    def suspend_refused() -> None:
        try:
            suspend()
        except svc.Conflict as exc:
            refused.append(exc)

    while_held(api, completes, suspend_refused)
    assert phase_of(api, workload_id)[0] == "Completed"  # not Stopping: it had ended
    assert refused and "Completed" in str(refused[0])


@POSTGRESQL_ONLY
def test_removing_a_user_while_their_workload_starts_does_not_deadlock(api: API) -> None:
    """A start locks the workload, then issues its submitter a pod token (whose insert
    checks the user's row); removing the user empties the workload's createdBy. Each
    waits for the other unless both take the workload first (found in a suite run:
    PostgreSQL's deadlock detector failed the user's DELETE with a 500)."""
    researcher(api, "rae", "team-rae")
    with api.client.app.state.readers() as s:
        rae = s.query(User).filter_by(name="rae").one()
        admin = s.query(User).filter_by(is_admin=True).one()
        s.expunge_all()
    (workload_id,) = insert(
        api, [{"name": "raes", "phase": "Pending", "created_by": rae.id, "project": "team-rae"}]
    )

    def starting(s: Session) -> None:  # as pipeline.act: the row, FOR UPDATE
        s.get(Workload, workload_id, with_for_update=True)

    def remove_rae() -> None:
        with api.client.app.state.sessions() as s:
            users.remove(s, admin, "rae")

    def pod_token(s: Session) -> None:  # as placing's claim, once the removal waits
        assert auth.issue_pod_token(s, s.get(Workload, workload_id), 60)

    while_held(api, starting, remove_rae, then=pod_token)
    with api.client.app.state.readers() as s:
        assert s.query(User).filter_by(name="rae").one_or_none() is None
        assert s.get(Workload, workload_id).created_by is None  # the workload stays

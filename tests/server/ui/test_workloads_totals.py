"""The workloads page's totals (issue 27, item 2): counted once for every render and
live update of the same filters by viewers of the same projects, and counted again
the moment this server commits a change to a workload, so the page a user is sent to
after a submit or a delete shows the total as it is; another process's change shows
within LIVE_TTL_S."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, event, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from ringleader.server.models import Project, Workload
from ringleader.server.services import ui_live
from ringleader.server.services.workload_changes import WorkloadChanges
from tests.conftest import wait_until
from tests.helpers.workloads_page import insert, researcher
from tests.server.conftest import API
from tests.server.ui.forms import FETCH, HTML, login


def shown_total(api: API, query: str = "") -> int:
    """The total the page prints (``1–20 of 31`` or ``31 workloads``)."""
    page = api.client.get(f"/workloads{query}", headers=HTML)
    assert page.status_code == 200, page.text[:300]
    found = re.search(r"of ([\d,]+)<|([\d,]+) workloads?<", page.text)
    assert found is not None, page.text[:2000]
    return int((found.group(1) or found.group(2)).replace(",", ""))


@pytest.fixture
def counts(api: API) -> Iterator[list[str]]:
    """Each count of the workloads table the app's engines run, as its SQL (a query
    that counts something else per workload, as reconciling's stamps count pods, is
    not one)."""
    state = api.client.app.state
    engines: set[Engine] = {state.sessions.kw["bind"], state.readers.kw["bind"]}
    seen: list[str] = []

    def before(_conn, _cursor, statement: str, *_rest) -> None:
        if statement.lstrip().lower().startswith("select count(") and "workloads" in statement:
            seen.append(statement)

    for engine in engines:
        event.listen(engine, "before_cursor_execute", before)
    yield seen
    for engine in engines:
        event.remove(engine, "before_cursor_execute", before)


@pytest.fixture
def never_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    """A total lives as long as no workload changes (no time runs out in the test)."""
    monkeypatch.setattr(ui_live, "LIVE_TTL_S", 3600.0)


def test_one_count_serves_every_page_and_sort_of_the_same_filters(
    api: API, counts: list[str], never_stale: None
) -> None:
    insert(api, [{"name": f"job-{i:02d}", "phase": "Completed"} for i in range(31)])
    login(api)
    assert shown_total(api, "?size=10") == 31
    assert shown_total(api, "?size=10&page=3") == 31
    assert shown_total(api, "?size=10&sort=name&order=asc") == 31
    assert api.client.get("/workloads/live?size=10&version=x", headers=FETCH).json()["total"] == 31
    assert len(counts) == 1, counts
    assert shown_total(api, "?status=Failed") == 0  # other filters: their own count
    assert len(counts) == 2


def test_a_submission_and_a_delete_show_in_the_total_at_once(
    api: API, counts: list[str], never_stale: None
) -> None:
    insert(api, [{"name": f"job-{i}", "phase": "Completed"} for i in range(3)])
    login(api)
    assert shown_total(api) == 3
    submitted = api.submit("fresh", "sleep 600")
    assert submitted.status_code == 202, submitted.text
    assert shown_total(api) == 4  # at once: its commit made the shared total stale
    workload_id = submitted.json()["workloadId"]
    assert api.delete(f"/api/v1/workloads/distributed/{workload_id}").status_code == 202
    wait_until(lambda: shown_total(api) == 3, 60, "the deleted workload gone from the total")


def test_viewers_of_other_projects_never_share_a_total(api: API, never_stale: None) -> None:
    insert(api, [{"name": "admins-own", "phase": "Completed"}])
    key = researcher(api, "rita", "team-r")
    insert(api, [{"name": "ritas", "phase": "Completed", "project": "team-r"}])
    login(api)
    assert shown_total(api) == 2
    login(api, *key)
    assert shown_total(api) == 1  # her projects' total, not the admin's counted just now
    assert api.client.get("/workloads/live?version=x", headers=FETCH).json()["total"] == 1


def test_another_process_s_change_shows_within_the_time_to_live(api: API) -> None:
    """A write this server did not make (a standby's, a script's) is not seen by its
    change count: the total still follows once LIVE_TTL_S has passed."""
    insert(api, [{"name": f"job-{i}", "phase": "Completed"} for i in range(2)])
    login(api)
    assert shown_total(api) == 2
    engine: Engine = api.client.app.state.sessions.kw["bind"]
    elsewhere = create_engine(engine.url)  # its own engine: not the server's sessions
    try:
        with Session(elsewhere) as s, s.begin():
            first = s.query(Workload).order_by(Workload.name).first()
            assert first is not None
            s.execute(
                update(Workload).where(Workload.id == first.id).values(deleted_at=first.created_at)
            )
    finally:
        elsewhere.dispose()
    wait_until(lambda: shown_total(api) == 1, 10 + ui_live.LIVE_TTL_S, "the other write counted")


def test_the_change_count_moves_after_a_workload_commit_only(api: API) -> None:
    """It moves once the commit is done (a reader that counted during the transaction
    holds the older generation), never for a rollback or a commit of other rows."""
    sessions = api.client.app.state.sessions
    changes = WorkloadChanges.watching(sessions)
    (workload_id,) = insert(api, [{"name": "watched", "phase": "Completed"}])
    after_insert = changes.generation
    assert after_insert == 1
    with sessions() as s:
        with s.begin():
            s.get(Workload, workload_id).phase_message = "flushed"
            s.flush()
            assert changes.generation == after_insert  # flushed, not committed
        assert changes.generation == after_insert + 1
        s.begin()
        s.get(Workload, workload_id).phase_message = "rolled back"
        s.flush()
        s.rollback()
        assert changes.generation == after_insert + 1
        with s.begin():
            s.get(Project, s.get(Workload, workload_id).project_id).name = "renamed"
        assert changes.generation == after_insert + 1

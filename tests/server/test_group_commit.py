"""Group commit (services/group_commit.py): submissions that wait at once share one
transaction, and one request's error stays that request's.

Batches are made on purpose: a *gate* request holds the writer until the
submissions under test all wait behind it, so they are one batch when it opens
(``GroupCommit.batches`` counts the transactions, which the tests check).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from ringleader.errors import Conflict
from ringleader.server.models import Project
from ringleader.server.services import group_commit
from ringleader.server.services.group_commit import GroupCommit
from tests.conftest import wait_until
from tests.server.conftest import API
from tests.server.held import held_api

PATH = "/api/v1/workloads/distributed"


@pytest.fixture(params=["sqlite", "postgresql"])
def held(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[API]:
    """The app with its loops on against a backend that holds every workload."""
    url = request.getfixturevalue("pg_app_url") if request.param == "postgresql" else None
    yield from held_api(tmp_path, url)


def _body(api: API, name: str, project: str | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "projectId": project or api.project_id(),
        "spec": {"command": "python -c pass", "numWorkers": 2},
    }


def _names(api: API) -> list[str]:
    listed = api.get("/api/v1/workloads", params={"limit": 500}).json()["workloads"]
    return sorted(w["name"] for w in listed)


def in_one_batch(writer: GroupCommit, calls: list[Callable[[], Any]]) -> tuple[list[Any], int]:
    """Run ``calls`` (each ends in ``writer.run``) while a gate request holds the lead,
    so that they all wait, then open the gate: their answers (or errors), and how many
    transactions they took."""
    gate = threading.Event()

    def held_lead(session: Session, isolated: bool) -> None:
        gate.wait()

    writers, writer.max_writers = writer.max_writers, 1  # one writer, so: one batch
    with ThreadPoolExecutor(len(calls) + 1) as pool:
        leader = pool.submit(writer.run, held_lead)
        wait_until(lambda: writer.busy > 0, 30, "the gate holds the writer")
        futures = [pool.submit(call) for call in calls]
        wait_until(lambda: writer.waiting() == len(calls), 60, "every request waits")
        before = writer.batches
        gate.set()
        leader.result(timeout=60)
        answers = []
        for future in futures:
            try:
                answers.append(future.result(timeout=120))
            except Exception as exc:  # the answer under test
                answers.append(exc)
    writer.max_writers = writers
    return answers, writer.batches - before - 1  # less the gate's own


def _writer(api: API) -> GroupCommit:
    return group_commit.of(api.client.app.state)


def test_a_taken_name_in_a_batch_fails_that_request_alone(held: API) -> None:
    assert held.post(PATH, json=_body(held, "taken")).status_code == 202
    names = ["a", "taken", "b", "c"]
    calls = [lambda n=n: held.post(PATH, json=_body(held, n)) for n in names]
    answers, transactions = in_one_batch(_writer(held), calls)
    assert transactions == 1
    statuses = {n: a.status_code for n, a in zip(names, answers, strict=True)}
    assert statuses == {"a": 202, "taken": 409, "b": 202, "c": 202}, [a.text for a in answers]
    assert "already exists" in answers[1].json()["message"]
    assert _names(held) == ["a", "b", "c", "taken"]


def test_a_refused_request_in_a_batch_fails_alone(held: API) -> None:
    bad = _body(held, "nowhere", project="no-such-project")
    calls: list[Callable[[], httpx.Response]] = [
        lambda: held.post(PATH, json=_body(held, "x")),
        lambda: held.post(PATH, json=bad),
        lambda: held.post(PATH, json=_body(held, "y")),
    ]
    answers, transactions = in_one_batch(_writer(held), calls)
    assert transactions == 1
    assert [a.status_code for a in answers] == [202, 404, 202], [a.text for a in answers]
    assert _names(held) == ["x", "y"]


def test_one_key_twice_in_a_batch_is_one_workload(held: API) -> None:
    body, key = _body(held, "once"), {"Idempotency-Key": "k-batch"}
    calls = [lambda: held.post(PATH, json=body, headers=key) for _ in range(3)]
    calls.append(lambda: held.post(PATH, json=_body(held, "other")))
    answers, transactions = in_one_batch(_writer(held), calls)
    assert transactions == 1
    assert {a.status_code for a in answers} == {202}, [a.text for a in answers]
    assert len({a.json()["workloadId"] for a in answers[:3]}) == 1
    assert _names(held) == ["once", "other"]


def test_a_work_that_fails_after_adding_rows_leaves_none_of_them(held: API) -> None:
    writer = _writer(held)

    def adds(name: str, fails: bool) -> Callable[[Session, bool], str]:
        def work(session: Session, isolated: bool) -> str:
            session.add(Project(name=name, resources=[]))
            if isolated:
                session.flush()
            if fails:
                raise Conflict(f"{name} refused after adding its row")
            return name

        return work

    calls = [
        lambda: writer.run(adds("kept-1", False)),
        lambda: writer.run(adds("undone", True)),
        lambda: writer.run(adds("kept-2", False)),
    ]
    answers, transactions = in_one_batch(writer, calls)
    assert transactions == 1
    assert answers[0] == "kept-1" and answers[2] == "kept-2"
    assert isinstance(answers[1], Conflict)
    with held.client.app.state.readers() as s:
        names = set(s.scalars(select(Project.name)))
    assert {"kept-1", "kept-2"} <= names and "undone" not in names


class _Aborted(Exception):
    """What psycopg raises for a transaction PostgreSQL aborted (its SQLSTATE)."""

    sqlstate = "40P01"  # deadlock_detected


def test_a_transaction_the_database_aborted_is_run_again_not_answered(held: API) -> None:
    """A deadlock between two writers' batches (seen in a suite: retries of each
    other's names inserted in opposite orders) is nobody's error: the batch is run
    again, each request alone, and a request aborted again is tried again."""
    writer = _writer(held)
    aborts = {"twice": 2, "always": 100}

    def adds(name: str) -> Callable[[Session, bool], str]:
        def work(session: Session, isolated: bool) -> str:
            session.add(Project(name=name, resources=[]))
            session.flush()  # the insert that the database aborts
            if aborts.get(name, 0) > 0:
                aborts[name] -= 1
                raise OperationalError("INSERT INTO projects ...", {}, _Aborted())
            return name

        return work

    names = ["first", "twice", "always", "last"]
    answers, _ = in_one_batch(writer, [lambda n=n: writer.run(adds(n)) for n in names])
    assert answers[:2] == ["first", "twice"] and answers[3] == "last", answers
    tries = 100 - aborts["always"]  # alone TRANSIENT_TRIES times, after the batch's
    assert isinstance(answers[2], OperationalError), answers  # then it gave up
    assert group_commit.TRANSIENT_TRIES <= tries <= group_commit.TRANSIENT_TRIES + 2
    with held.client.app.state.readers() as s:
        kept = set(s.scalars(select(Project.name)))
    assert {"first", "twice", "last"} <= kept and "always" not in kept


def test_32_clients_retrying_lose_and_duplicate_nothing(held: API) -> None:
    """32 clients submit 4 workloads each, every one with its key, and send each one
    again (a retry whose first answer was lost), half of them while the first is in
    flight: one workload per key, each retry answered with the first's id."""
    project = held.project_id()
    start = threading.Barrier(32)

    def client(index: int) -> list[tuple[str, str, str]]:
        start.wait()
        seen = []
        with ThreadPoolExecutor(2) as twice:
            for n in range(4):
                name, key = f"c{index}-{n}", str(uuid.uuid4())
                spec = {"command": "python -c pass", "numWorkers": 2}
                body = {"name": name, "projectId": project, "spec": spec}

                def send(body: dict[str, Any] = body, key: str = key) -> httpx.Response:
                    return held.post(PATH, json=body, headers={"Idempotency-Key": key})

                if n % 2:  # the retry races the first
                    answers = [f.result() for f in [twice.submit(send), twice.submit(send)]]
                else:
                    answers = [send(), send()]
                for answer in answers:
                    assert answer.status_code == 202, answer.text
                    seen.append((key, name, answer.json()["workloadId"]))
        return seen

    with ThreadPoolExecutor(32) as pool:
        seen = [x for answers in pool.map(client, range(32)) for x in answers]
    ids_by_key: dict[str, set[str]] = {}
    for key, _name, workload_id in seen:
        ids_by_key.setdefault(key, set()).add(workload_id)
    assert len(ids_by_key) == 128
    assert all(len(ids) == 1 for ids in ids_by_key.values())
    assert held.get("/api/v1/workloads/count").json()["count"] == 128
    expected = sorted(f"c{i}-{n}" for i in range(32) for n in range(4))
    assert _names(held) == expected

"""Many open ``logs?follow`` streams cost the server a bounded share of its time (issue
27, item 6): followers of one workload share one read of its phase per FOLLOW_POLL_S,
and while many are open each waits longer, so that together they read about
FOLLOW_READS_PER_S times a second."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.server.backends.base import LogLine
from ringleader.server.db import Database
from ringleader.server.models import User, Workload
from ringleader.server.services import logs
from ringleader.server.services import workloads as svc
from ringleader.spec import WorkloadSpec


def _running(database: Database, name: str) -> str:
    with database.writer() as s, s.begin():
        admin = s.scalar(select(User).where(User.name == "admin"))
        body = {"name": name, "projectId": "default",
                "spec": {"command": "python train.py", "numWorkers": 1}}  # fmt: skip
        row = svc.submit(s, admin, WorkloadSpec.model_validate(body))
        row.backend, row.handle, row.phase = "local", f"run-{name}", "Running"
        return row.id


class Counted:
    """``database.reader`` that counts the sessions it opens."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.opened = 0

    def __call__(self) -> contextlib.AbstractContextManager[Session]:
        self.opened += 1
        return self.database.reader()


def test_the_followers_of_one_workload_share_a_read_of_its_phase(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload_id = _running(database, "shared")
    readers = Counted(database)
    clock = [1000.0]
    monkeypatch.setattr(logs.time, "monotonic", lambda: clock[0])
    answers = [logs.phase_of(readers, workload_id) for _ in range(20)]  # twenty followers
    assert answers == [("Running", "run-shared", "local")] * 20
    assert readers.opened == 1
    with database.writer() as s, s.begin():
        s.get(Workload, workload_id).phase = "Completed"  # type: ignore[union-attr]
    clock[0] += logs.FOLLOW_POLL_S * 1.01  # an interval later the change is seen, once
    assert [logs.phase_of(readers, workload_id) for _ in range(5)] == [
        ("Completed", "run-shared", "local")
    ] * 5
    assert readers.opened == 2
    with database.writer() as s, s.begin():
        s.delete(s.get(Workload, workload_id))
    clock[0] += logs.FOLLOW_POLL_S * 1.01
    assert logs.phase_of(readers, workload_id) is None  # gone: the follow ends


def test_many_open_follows_each_wait_longer() -> None:
    assert logs.follow_wait(1, 0.0) == logs.FOLLOW_POLL_S
    assert logs.follow_wait(1, 1.0) == 2.0  # a long read: a third of its time
    per_s = logs.FOLLOW_READS_PER_S
    assert logs.follow_wait(1000, 0.0) == 1000 / per_s  # together: FOLLOW_READS_PER_S/s
    assert logs.follow_wait(int(per_s * logs.FOLLOW_POLL_S), 0.0) == logs.FOLLOW_POLL_S


class Lines:
    name = "local"

    def named(self, _name: str | None) -> Lines:
        return self

    def logs(self, handle: str, pod: str | None = None, tail: int | None = None) -> Any:
        return [LogLine(f"{handle}-master-0", 0, "stdout", "hello")]


def test_open_follows_are_counted_until_their_streams_close(database: Database) -> None:
    ids = [_running(database, f"f{i}") for i in range(3)]

    async def main() -> None:
        before = logs.open_follows()
        streams: list[AsyncIterator[str]] = []
        for workload_id in ids:
            session = database.writer()
            admin = session.scalar(select(User).where(User.name == "admin"))
            stream = logs.log_text(
                session,
                admin,
                workload_id,
                backends=Lines(),
                readers=database.reader,
                follow=True,
            )  # type: ignore[arg-type]
            assert isinstance(stream, AsyncIterator)
            assert (await stream.__anext__()).endswith("hello\n")  # streaming now
            streams.append(stream)
        assert logs.open_follows() == before + 3
        for stream in streams:
            await stream.aclose()  # type: ignore[attr-defined]  # the client went away
        assert logs.open_follows() == before

    anyio.run(main)

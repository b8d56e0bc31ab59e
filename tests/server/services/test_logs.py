"""``logs?follow`` of a workload asked for while it waits: the lines come from the
backend that placed it, which a Pending workload does not have yet."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from sqlalchemy import select

from ringleader.errors import TooManyRequests
from ringleader.server.backends.base import LogLine
from ringleader.server.db import Database
from ringleader.server.models import User, Workload
from ringleader.server.services import workloads as svc
from ringleader.server.services.logs import FollowSlots, log_text
from ringleader.spec import WorkloadSpec


class Lines:
    """A backend stand-in that has the run's lines under one handle."""

    def __init__(self, name: str, lines: dict[str, list[LogLine]]) -> None:
        self.name = name
        self.lines = lines

    def logs(self, handle: str, pod: str | None = None, tail: int | None = None) -> list[LogLine]:
        return list(self.lines.get(handle, []))


class Named:
    """The two backends a server may have: the default, and the one a pool names."""

    def __init__(self, *backends: Lines) -> None:
        self.by_name = {b.name: b for b in backends}

    def named(self, name: str | None) -> Lines:
        return self.by_name[name or "local"]


def test_follow_reads_the_backend_that_placed_the_run(database: Database) -> None:
    with database.writer() as s, s.begin():
        admin = s.scalar(select(User).where(User.name == "admin"))
        body = {"name": "train", "projectId": "default",
                "spec": {"command": "python train.py", "numWorkers": 1}}  # fmt: skip
        workload_id = svc.submit(s, admin, WorkloadSpec.model_validate(body)).id
    line = LogLine(pod="train-master-0", attempt=0, stream="stdout", text="hello")
    backends = Named(Lines("local", {}), Lines("ssh", {"run-1": [line]}))
    session = database.writer()
    admin = session.scalar(select(User).where(User.name == "admin"))
    stream = log_text(
        session, admin, workload_id, backends=backends, readers=database.reader, follow=True
    )  # type: ignore[arg-type]
    with database.writer() as s, s.begin():  # placed on an SSH node, ran and ended
        row = s.get(Workload, workload_id)
        row.backend, row.handle, row.phase = "ssh", "run-1", "Completed"
    assert isinstance(stream, AsyncIterator)  # a follow waits on the event loop
    assert anyio.run(collected, stream) == ["[train-master-0] hello\n"]


def test_a_follow_catching_up_a_long_log_reads_it_once(database: Database) -> None:
    """Batches of FOLLOW_BATCH lines come from one pass over the log, not a pass per
    batch (which made catching up on a big log quadratic)."""
    from ringleader.server.services.logs import FOLLOW_BATCH

    with database.writer() as s, s.begin():
        admin = s.scalar(select(User).where(User.name == "admin"))
        body = {"name": "chatty", "projectId": "default",
                "spec": {"command": "python train.py", "numWorkers": 1}}  # fmt: skip
        row = svc.submit(s, admin, WorkloadSpec.model_validate(body))
        row.backend, row.handle, row.phase = "local", "run-2", "Completed"
        workload_id = row.id
    count = 5 * FOLLOW_BATCH + 7
    lines = [LogLine("chatty-master-0", 0, "stdout", f"line {i}") for i in range(count)]
    backend = Lines("local", {"run-2": lines})
    passes = []
    real = backend.logs

    def counted(handle: str, pod: str | None = None, tail: int | None = None) -> list[LogLine]:
        passes.append(handle)
        return real(handle, pod, tail)

    backend.logs = counted  # type: ignore[method-assign]
    session = database.writer()
    admin = session.scalar(select(User).where(User.name == "admin"))
    stream = log_text(
        session, admin, workload_id, backends=Named(backend), readers=database.reader, follow=True
    )  # type: ignore[arg-type]
    got = anyio.run(collected, stream)
    assert len(got) == count and got[-1] == f"[chatty-master-0] line {count - 1}\n"
    assert len(passes) == 1, passes


async def collected(stream: AsyncIterator[str]) -> list[str]:
    return [line async for line in stream]


def test_a_users_follows_are_capped_and_their_slots_come_back() -> None:
    slots = FollowSlots(per_user=2)
    first, second = slots.take("alice"), slots.take("alice")
    with pytest.raises(TooManyRequests, match="at most 2 open log follows per user"):
        slots.take("alice")
    bob = slots.take("bob")  # another user's follows are counted apart
    first()
    first()  # giving a slot back twice gives it back once
    third = slots.take("alice")
    with pytest.raises(TooManyRequests):
        slots.take("alice")
    for release in (second, third, bob):
        release()
    assert slots.held("alice") == slots.held("bob") == 0

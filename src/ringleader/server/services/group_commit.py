"""Group commit: the writes that wait at the same moment share one transaction.

Why: a submission's own work (validate, add a row and its events) is small next to
what a transaction costs around it (BEGIN IMMEDIATE, the commit, taking and giving
back the one SQLite writer connection, waking the next thread that waits for it).
With 32 clients those costs were about a third of the server's time.  Here one
*writer* thread takes every request that waits (at most ``MAX_BATCH``), runs them
in one transaction and commits once.  The routes wait for it on the event loop
(``submit``): no worker thread each, and one wake-up of the loop per batch, where
a thread per waiting request, each woken on its own, made the machine's scheduler
hand the interpreter's lock around once per request.

A batch is first run *together*: every request's work adds its rows, none is
flushed until the end, then one flush writes them all (a statement per table, not
per request: a round trip each on PostgreSQL, where a thread that waits for the
network waits again for the interpreter's lock).  A work that refuses its request
(raises) before adding anything answers that request alone.  If the flush fails
(a taken name, two retries of one key) or a work raised after adding rows, the
batch is run again *isolated*: each request in a savepoint of its own, which its
error undoes alone.

Invariants:

- a work is ``work(session, isolated)``: it only adds rows; when ``isolated`` it
  flushes them in a savepoint of its own; when not, it must not flush (autoflush
  is off) and should raise before it adds anything;
- an error of one request (a taken name, a body the services refuse, a lost race
  on an idempotency key) is that request's answer alone; the others are created;
- nothing half-created: a request's rows are in the database exactly when its
  answer is a success, which is sent only after the shared commit succeeded;
- a batch whose commit (or transaction) fails is run again one request per
  transaction, so one request's failure never fails another's;
- a transaction the database gave up (PostgreSQL's deadlock or serialization
  failure: two writers' batches inserting retries of each other's rows in
  opposite orders wait on each other's unique keys) is nobody's answer: the
  batch is run again one request per transaction, each tried up to
  ``TRANSIENT_TRIES`` times (its rows are gone with the aborted transaction);
- requests are taken in the order they came, so nobody waits behind a stream;
- a request's work runs on the writer's thread, so it must not depend on its caller's
  thread; it gets the batch's session and must neither commit nor close it;
- writer threads exist while there is work: each ends after ``IDLE_S`` without
  any, and the next request starts one (one on SQLite, whose writes are serial
  anyway; up to ``PG_WRITERS`` on PostgreSQL, whose round trips they overlap).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

T = TypeVar("T")
Sessions = Callable[[], AbstractContextManager[Session]]
MAX_BATCH = 32  # requests per transaction: bounds how long the write lock is held
IDLE_S = 5.0  # a writer thread ends after this long without work
# Writer threads on PostgreSQL: a batch waits for the network at each statement, and
# several batches overlap those waits (SQLite has one writer connection: one thread).
PG_WRITERS = 3

Work = Callable[[Session, bool], T]
# PostgreSQL's SQLSTATEs for a transaction it aborted to let another go on: run again.
TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization
TRANSIENT_TRIES = 5


def transient(exc: BaseException) -> bool:
    """The database aborted the transaction for another's sake (``TRANSIENT_SQLSTATES``):
    the same work in a new transaction may well succeed."""
    return isinstance(exc, DBAPIError) and (
        getattr(exc.orig, "sqlstate", None) in TRANSIENT_SQLSTATES
    )


@dataclass(eq=False)
class _Job:
    work: Work[Any]
    waiter: asyncio.Future[Any] | Future[Any]
    loop: asyncio.AbstractEventLoop | None = None  # the waiter's, for an asyncio future
    done: bool = False
    result: Any = None
    error: BaseException | None = None


class GroupCommit:
    """Runs ``work(session, isolated)`` for concurrent callers in shared transactions
    (see the module docstring): ``submit`` on an event loop, ``run`` from a thread."""

    def __init__(self, sessions: Sessions, max_batch: int = MAX_BATCH, writers: int = 1) -> None:
        self.sessions, self.max_batch, self.max_writers = sessions, max_batch, writers
        self._ready = threading.Condition()
        self._queue: deque[_Job] = deque()
        self._writers = 0  # writer threads running
        self._idle = 0  # of which waiting for work
        self.busy = 0  # writers running a batch now (for tests)
        self.batches = 0  # how many transactions were committed (for tests and benches)
        self.batched = 0  # how many requests they held

    async def submit(self, work: Work[T]) -> T:
        """``work``'s answer once its batch committed (its error if it failed)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[T] = loop.create_future()
        self._enqueue(_Job(work, waiter, loop))
        return await waiter

    def run(self, work: Work[T]) -> T:
        """``submit`` for a thread: blocks until the answer."""
        waiter: Future[T] = Future()
        self._enqueue(_Job(work, waiter))
        return waiter.result()

    def waiting(self) -> int:
        """Requests queued and not yet taken by the writer."""
        return len(self._queue)

    def _enqueue(self, job: _Job) -> None:
        with self._ready:
            self._queue.append(job)
            if self._idle:
                self._ready.notify()
            elif self._writers < self.max_writers:
                self._writers += 1
                threading.Thread(
                    target=self._write, name="ringleader-group-commit", daemon=True
                ).start()

    def _write(self) -> None:
        """A writer thread: batches until none came for ``IDLE_S``."""
        while True:
            with self._ready:
                if not self._queue:
                    self._idle += 1
                    self._ready.wait(IDLE_S)
                    self._idle -= 1
                if not self._queue:
                    self._writers -= 1
                    return
                count = min(self.max_batch, len(self._queue))
                batch = [self._queue.popleft() for _ in range(count)]
                self.busy += 1
            try:
                self._run_batch(batch)
            except BaseException as exc:  # never leave a caller waiting
                for job in batch:
                    if not job.done:
                        job.result, job.error, job.done = None, exc, True
            finally:
                with self._ready:
                    self.busy -= 1
            _answer(batch)

    def _run_batch(self, batch: list[_Job]) -> None:
        if len(batch) == 1:
            self._run_alone(batch[0])
            return
        for run in (self._together, self._isolated):
            try:
                outcomes = run(batch)
            except Exception:
                continue
            self.batches += 1
            self.batched += len(batch)
            for job, result, error in outcomes:
                job.result, job.error, job.done = result, error, True
            return
        for job in batch:  # the shared transaction failed: each alone, none fails another
            self._run_alone(job)

    def _together(self, batch: list[_Job]) -> list[tuple[_Job, Any, Any]]:
        outcomes: list[tuple[_Job, Any, BaseException | None]] = []
        with self.sessions() as session, session.begin():
            with session.no_autoflush:
                for job in batch:
                    added = len(session.new)
                    try:
                        outcomes.append((job, job.work(session, False), None))
                    except Exception as exc:
                        if transient(exc) or len(session.new) != added:
                            raise _BatchBroken from exc  # rows left behind: isolate
                        outcomes.append((job, None, exc))
            session.flush()
        return outcomes

    def _isolated(self, batch: list[_Job]) -> list[tuple[_Job, Any, Any]]:
        outcomes: list[tuple[_Job, Any, BaseException | None]] = []
        with self.sessions() as session, session.begin():
            for job in batch:
                try:
                    with session.begin_nested():  # what it added goes if it fails
                        outcomes.append((job, job.work(session, True), None))
                except Exception as exc:  # this request's answer; the batch goes on
                    if transient(exc) or not session.in_transaction():
                        raise _BatchBroken from exc
                    outcomes.append((job, None, exc))
        return outcomes

    def _run_alone(self, job: _Job) -> None:
        for tries_left in range(TRANSIENT_TRIES - 1, -1, -1):
            try:
                with self.sessions() as session, session.begin():
                    job.result = job.work(session, True)
                self.batches += 1
                self.batched += 1
                job.error = None
                break
            except BaseException as exc:
                job.result, job.error = None, exc
                if not (tries_left and transient(exc)):
                    break
        job.done = True


class _BatchBroken(Exception):
    """One request's error ended the shared transaction itself."""


def _answer(batch: list[_Job]) -> None:
    """Hand each job's answer to its waiter: a thread's at once, and an event loop's
    in one call per loop (one wake-up of the loop for the whole batch)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
    for job in batch:
        if job.loop is None:
            waiter: Any = job.waiter
            if job.error is not None:
                waiter.set_exception(job.error)
            else:
                waiter.set_result(job.result)
        else:
            by_loop.setdefault(job.loop, []).append(job)
    for loop, jobs in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(_settle, jobs)


def _settle(jobs: list[_Job]) -> None:
    """On the waiters' loop: their answers (a waiter cancelled meanwhile is skipped:
    its client went away; what it made stays, as a retry with its key would find)."""
    for job in jobs:
        waiter: Any = job.waiter
        if waiter.done():
            continue
        if job.error is not None:
            waiter.set_exception(job.error)
        else:
            waiter.set_result(job.result)


def of(state: Any) -> GroupCommit:
    """The app's group commit over its writer sessions (``state``: the app's state),
    made at its first use; call it on the event loop (no two are ever made)."""
    found = getattr(state, "group_commit", None)
    if found is None or found.sessions is not state.sessions:  # a restarted lifespan
        bind = state.sessions.kw.get("bind")
        writers = 1 if bind is None or bind.dialect.name == "sqlite" else PG_WRITERS
        found = state.group_commit = GroupCommit(state.sessions, writers=writers)
    return found  # type: ignore[no-any-return]

"""A workload's logs as text lines: what ``GET .../logs`` streams and the UI shows.

Nomenclature: a *log line* (``backend.LogLine``) is one line one pod wrote,
with its pod, attempt, stream and time; the text form is
``[TIMESTAMP ]<[pod]> text``.

Invariants:
- everything the caller can get wrong (the workload, ``pod``, ``since``) is
  checked before the first line, so a refusal is an HTTP error, never a
  broken stream;
- no transaction stays open while lines stream (``follow`` may last hours):
  the caller's session is closed and each check uses a fresh reader;
- per (pod, attempt, stream) the files only grow, so a line is sent once by
  counting what was sent, and a workload that ended is read once more after
  it was seen ending, so its last lines are never missed;
- ``tail`` bounds memory by the lines asked for: a local run's files are read
  from their end (``backends.local.logtail``), and no stream holds more than
  ``tail`` lines at once;
- a ``follow`` ends within ``FOLLOW_POLL_S`` of the server's ``stopping``
  event, so a server told to stop is not held by its open streams;
- a ``follow`` waits on the event loop: its reads take turns on ``FOLLOW_THREADS``
  threads of their own (a database connection only for one short read each), and a
  user has at most ``FollowSlots.per_user`` open at once, so open follows never
  starve the request threads or the database pool (issue 22, item 6).
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, aclosing
from datetime import datetime
from typing import Any

import anyio
from sqlalchemy.orm import Session

from ringleader.errors import InvalidSpec, TooManyRequests
from ringleader.server.admission import follows_refusal
from ringleader.server.backends import BackendSet
from ringleader.server.backends.base import LogLine
from ringleader.server.models import User, Workload
from ringleader.server.phases import FINAL
from ringleader.server.services.workloads import get

_DURATION = re.compile(r"^(\d+)([smhd])$")
FOLLOW_POLL_S = 0.3  # how often ``follow`` looks for new lines


def log_text(
    session: Session,
    user: User,
    workload_id: str,
    *,
    backends: BackendSet,
    readers: Callable[[], AbstractContextManager[Session]],
    pod: str | None = None,
    tail: int | None = None,
    since: str | None = None,
    follow: bool = False,
    timestamps: bool = False,
    stopping: threading.Event | None = None,
    seen: dict[tuple[str, int, str], int] | None = None,
    threads: anyio.CapacityLimiter | None = None,
) -> Iterator[str] | AsyncIterator[str]:
    """Check the request, close ``session``, and return the lines to stream (with
    ``follow``, an async iterator whose waits hold no thread: ``_follow``).

    ``pod`` is a pod's full name or its suffix (``worker-1``); ``since`` a
    duration (``5m``) or an ISO time; ``follow`` streams until the workload ends
    or ``stopping`` is set (the server shuts down).  ``seen``: lines already sent per
    (pod, attempt, stream), updated as lines are read: a cursor for the UI's polls,
    which get only the lines after it (the last ``tail`` of them).  ``threads``: where
    a follow's reads run (``FollowSlots.threads``; None: a limiter of its own).
    """
    stopping = stopping or threading.Event()
    workload = get(session, user, workload_id)
    # The backend is the one that placed the run: a workload still Pending has none
    # yet, so ``finished`` takes both the handle and its backend once it is admitted.
    backend = backends.named(workload.backend)
    state: dict[str, Any] = {"handle": workload.handle, "backend": backend}
    wid = workload.id
    if pod is not None:
        names = {p.name for p in workload.pods}
        pod = pod if pod in names else f"{workload.name}-{pod}"
        if pod not in names:
            raise InvalidSpec(
                f"no such pod in workload {workload.name!r}; pods: {sorted(names)}", "pod"
            )
    after = _since(since)
    cursor = seen is not None
    session.close()  # no transaction stays open while streaming

    def unsent(seen: dict[tuple[str, int, str], int]) -> Iterator[LogLine]:
        """Lines not yet sent, in order, each marked sent in ``seen`` as it is
        yielded: per (pod, attempt, stream) the files only grow.  One pass reads the
        log once, however many turns consume it (``_follow``'s batches)."""
        counts: dict[tuple[str, int, str], int] = {}
        handle = state["handle"]
        for ln in state["backend"].logs(handle, pod=pod) if handle else []:
            key = (ln.pod, ln.attempt, ln.stream)
            if ln.skipped:  # lines rotated away: counted, so later lines keep their place
                counts[key] = counts.get(key, 0) + ln.skipped
                seen[key] = max(seen.get(key, 0), counts[key])
                continue
            if after is not None and ln.time is not None and ln.time < after:
                continue
            counts[key] = counts.get(key, 0) + 1
            if counts[key] > seen.get(key, 0):
                seen[key] = counts[key]
                yield ln

    def fetch(seen: dict[tuple[str, int, str], int], keep: int | None = None) -> deque[LogLine]:
        """Every line not yet sent (the last ``keep`` of them), all marked sent."""
        return deque(unsent(seen), maxlen=keep)

    def finished() -> bool:
        """True once the workload ended; picks up the handle once it is admitted."""
        current = phase_of(readers, wid)
        if current is None:
            return True
        phase, handle, backend_name = current
        if state["handle"] is None and handle:
            state["handle"], state["backend"] = handle, backends.named(backend_name)
        return phase in (*FINAL, "Deleted")

    def stream() -> Iterator[str]:
        sent = seen if seen is not None else {}
        # With a cursor, only what is newer: never the backend's plain tail.
        if tail and after is None and state["handle"] and not cursor:
            first: Iterator[LogLine] | deque[LogLine] = backend.logs(
                state["handle"], pod=pod, tail=tail
            )
        else:
            first = fetch(sent, keep=tail)
        for ln in first:
            yield _format(ln, timestamps)

    if not follow:
        return stream()
    threads = threads or anyio.CapacityLimiter(FOLLOW_THREADS)
    return _follow(fetch, unsent, finished, tail, timestamps, stopping, threads)


# What every follow's reads share: a few threads of their own, so open follows never
# take the threads (or, through them, the database connections) other requests need.
FOLLOW_THREADS = 2
FOLLOW_BATCH = 1_000  # lines read per turn on a thread: memory stays this, not the log's
# All open follows together read about this many times a second at most: past
# FOLLOW_READS_PER_S * FOLLOW_POLL_S follows, each waits longer between reads, so a
# thousand open follows cost the server what 400 reads a second cost, not 3,300.
FOLLOW_READS_PER_S = 400
_open_follows = [0]  # follows streaming in this process now (``_follow``)
_open_lock = threading.Lock()


def open_follows() -> int:
    """How many ``follow`` streams this process has open."""
    return _open_follows[0]


def follow_wait(open_now: int, read_s: float) -> float:
    """Seconds a follow waits before it reads again: FOLLOW_POLL_S; longer after a long
    read (a follow reads at most a third of its time: a big log is read whole); and
    longer while many are open, so that together they read FOLLOW_READS_PER_S a second."""
    return max(FOLLOW_POLL_S, 2 * read_s, open_now / FOLLOW_READS_PER_S)


# Each followed workload's phase, handle and backend, read once per FOLLOW_POLL_S
# whatever the number of its followers (twenty people following one training run
# make one database read, not twenty): (readers, id) -> (read at, answer).
_PHASES: dict[tuple[object, str], tuple[float, tuple[str, str | None, str] | None]] = {}
_PHASES_LOCK = threading.Lock()


def phase_of(
    readers: Callable[[], AbstractContextManager[Session]], workload_id: str
) -> tuple[str, str | None, str] | None:
    """(phase, handle, backend) of a workload, None once it is gone; at most
    FOLLOW_POLL_S old (a follow then ends that much later, never earlier)."""
    key = (readers, workload_id)
    now = time.monotonic()
    with _PHASES_LOCK:
        cached = _PHASES.get(key)
    if cached is not None and now - cached[0] < FOLLOW_POLL_S:
        return cached[1]
    with readers() as session:
        row = session.get(Workload, workload_id)
        answer = None if row is None else (row.phase, row.handle, row.backend)
    with _PHASES_LOCK:
        _PHASES[key] = (now, answer)
        if len(_PHASES) > 64:  # forget workloads no follow asked about lately
            for stale in [k for k, (t, _) in _PHASES.items() if now - t > 10 * FOLLOW_POLL_S]:
                del _PHASES[stale]
    return answer


def _take(lines: Iterator[LogLine]) -> list[LogLine]:
    return list(itertools.islice(lines, FOLLOW_BATCH))


async def _follow(
    fetch: Callable[..., deque[LogLine]],
    unsent: Callable[[dict[tuple[str, int, str], int]], Iterator[LogLine]],
    finished: Callable[[], bool],
    tail: int | None,
    timestamps: bool,
    stopping: threading.Event,
    threads: anyio.CapacityLimiter,
) -> AsyncIterator[str]:
    """Follow's stream: each read (files, then one short database read) runs on
    ``threads``; between reads it waits on the event loop, holding no thread
    and no database connection."""
    with _open_lock:
        _open_follows[0] += 1
    try:
        lines = _follow_lines(fetch, unsent, finished, tail, timestamps, stopping, threads)
        async with aclosing(lines):  # closed with this stream, not later by the collector
            async for text in lines:
                yield text
    finally:
        with _open_lock:
            _open_follows[0] -= 1


async def _follow_lines(
    fetch: Callable[..., deque[LogLine]],
    unsent: Callable[[dict[tuple[str, int, str], int]], Iterator[LogLine]],
    finished: Callable[[], bool],
    tail: int | None,
    timestamps: bool,
    stopping: threading.Event,
    threads: anyio.CapacityLimiter,
) -> AsyncIterator[str]:
    sent: dict[tuple[str, int, str], int] = {}
    if tail:  # the last ``tail`` lines first; without it, every line, in batches below
        for ln in await anyio.to_thread.run_sync(fetch, sent, tail, limiter=threads):
            yield _format(ln, timestamps)
    while True:
        began = time.monotonic()
        done = await anyio.to_thread.run_sync(finished, limiter=threads)
        lines = unsent(sent)  # read before fetching, so the last lines are never missed
        while True:  # one pass over the log, FOLLOW_BATCH lines per turn on a thread
            batch = await anyio.to_thread.run_sync(_take, lines, limiter=threads)
            for ln in batch:
                yield _format(ln, timestamps)
            if len(batch) < FOLLOW_BATCH:
                break
        if done or stopping.is_set():
            return
        # The backend's files offer no change notification; the server's stop does.
        wake = time.monotonic() + follow_wait(open_follows(), time.monotonic() - began)
        while True:  # in steps of FOLLOW_POLL_S, so a stop is seen within one
            await anyio.sleep(min(FOLLOW_POLL_S, max(0.0, wake - time.monotonic())))
            if stopping.is_set():
                return
            if time.monotonic() >= wake:
                break


class FollowSlots:
    """Open ``logs?follow`` streams per user, at most ``per_user`` at once: each holds
    a connection to the server and a share of the follow threads' time, so one user
    cannot take them all."""

    def __init__(self, per_user: int) -> None:
        self.per_user = per_user
        self.threads = anyio.CapacityLimiter(FOLLOW_THREADS)  # what every follow reads on
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, user_id: str) -> Callable[[], None]:
        """A slot for ``user_id`` and the call that gives it back (once, however
        often it is called); TooManyRequests (429) when the user has them all."""
        with self._lock:
            held = self._open.get(user_id, 0)
            if held >= self.per_user:
                raise TooManyRequests(follows_refusal(self.per_user, held))
            self._open[user_id] = held + 1
        given_back = False

        def release() -> None:
            nonlocal given_back
            with self._lock:
                if given_back:
                    return
                given_back = True
                left = self._open.get(user_id, 1) - 1
                if left > 0:
                    self._open[user_id] = left
                else:
                    self._open.pop(user_id, None)

        return release

    def held(self, user_id: str) -> int:
        with self._lock:
            return self._open.get(user_id, 0)


def _since(value: str | None) -> float | None:
    """``since`` as a UNIX time: a duration ago (``5m``, ``2h``) or an ISO time."""
    if not value:
        return None
    match = _DURATION.match(value)
    if match:
        ago = int(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
        now = time.time()
        return now - min(ago, now)  # before the epoch is all of it (and no float overflow)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidSpec("expected a duration like 5m, 2h or an ISO time", "since") from None
    try:
        return moment.timestamp()
    except (OverflowError, ValueError):  # at the edge of datetime's range (year 1 or 9999)
        return 0.0 if moment.year < 1970 else float("inf")


def _format(line: LogLine, timestamps: bool) -> str:
    stamp = ""
    if timestamps and line.time is not None:
        stamp = (
            datetime.fromtimestamp(line.time).astimezone().isoformat(timespec="milliseconds") + " "
        )
    return f"{stamp}[{line.pod}] {line.text}\n"

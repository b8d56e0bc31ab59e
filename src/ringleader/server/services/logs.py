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
  event, so a server told to stop is not held by its open streams.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from ringleader.errors import InvalidSpec
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
) -> Iterator[str]:
    """Check the request, close ``session``, and return the lines to stream.

    ``pod`` is a pod's full name or its suffix (``worker-1``); ``since`` a
    duration (``5m``) or an ISO time; ``follow`` streams until the workload ends
    or ``stopping`` is set (the server shuts down).  ``seen``: lines already sent per
    (pod, attempt, stream), updated as lines are read: a cursor for the UI's polls,
    which get only the lines after it (the last ``tail`` of them).
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

    def fetch(seen: dict[tuple[str, int, str], int], keep: int | None = None) -> deque[LogLine]:
        """Lines not yet sent (the last ``keep`` of them): per (pod, attempt, stream)
        the files only grow."""
        fresh: deque[LogLine] = deque(maxlen=keep)
        counts: dict[tuple[str, int, str], int] = {}
        handle = state["handle"]
        for ln in state["backend"].logs(handle, pod=pod) if handle else []:
            if after is not None and ln.time is not None and ln.time < after:
                continue
            key = (ln.pod, ln.attempt, ln.stream)
            counts[key] = counts.get(key, 0) + 1
            if counts[key] > seen.get(key, 0):
                fresh.append(ln)
        seen.update(counts)
        return fresh

    def finished() -> bool:
        """True once the workload ended; picks up the handle once it is admitted."""
        with readers() as s2:
            current = s2.get(Workload, wid)
            if current is None:
                return True
            if state["handle"] is None and current.handle:
                state["handle"], state["backend"] = current.handle, backends.named(current.backend)
            return current.phase in (*FINAL, "Deleted")

    def stream() -> Iterator[str]:
        sent = seen if seen is not None else {}
        # With a cursor, only what is newer: never the backend's plain tail.
        if tail and not follow and after is None and state["handle"] and not cursor:
            first: Iterator[LogLine] | deque[LogLine] = backend.logs(
                state["handle"], pod=pod, tail=tail
            )
        else:
            first = fetch(sent, keep=tail)
        for ln in first:
            yield _format(ln, timestamps)
        while follow:
            done = finished()  # read before fetching, so the last lines are never missed
            for ln in fetch(sent):
                yield _format(ln, timestamps)
            # The backend's files offer no change notification; the server's stop does.
            if done or stopping.wait(FOLLOW_POLL_S):
                return

    return stream()


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

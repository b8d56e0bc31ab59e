"""A count of this server's committed changes to workload rows, so a cache of
something the rows decide (the UI's list totals, ``ui_live``) can tell at once
that it is stale instead of waiting out its time to live.

Why: counting 100,000 live workloads costs 10-20 ms on PostgreSQL, most of a UI
page's time (issue 27, item 2); a total shared between renders must still change
the moment a submission or a delete commits, or a user would see the new row and
an old total on the page they are sent to.

Invariants:
- ``generation`` moves after every commit of a session that added, changed or
  deleted a ``Workload`` through the ORM (every workload write in the server goes
  through it; no Core ``update(Workload)`` exists), never before the commit: a
  reader that counted before the commit holds the older generation;
- other processes' writes (a standby, an admin's script) are not seen, nor a count
  read in a transaction that began before a commit and asked the generation after it
  (a SQLite reader's snapshot): a cache bounds both by its time to live. A request that
  begins after a commit (the page a user is sent to after a submit) counts after it.
"""

from __future__ import annotations

import threading

from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from ringleader.server.models import Workload


class WorkloadChanges:
    """The generation of the workload rows as this server has written them."""

    def __init__(self) -> None:
        self._generation = 0
        self._lock = threading.Lock()

    @property
    def generation(self) -> int:
        return self._generation

    def bump(self) -> None:
        with self._lock:
            self._generation += 1

    @classmethod
    def watching(cls, sessions: sessionmaker[Session]) -> WorkloadChanges:
        """A counter that the sessions ``sessions`` makes move as they commit."""
        changes = cls()
        changed = object()  # this counter's flag in Session.info, from flush to commit

        def flushed(session: Session, _context: object) -> None:
            touched = (*session.new, *session.dirty, *session.deleted)
            if any(isinstance(row, Workload) for row in touched):
                session.info[changed] = True

        def committed(session: Session) -> None:
            if session.info.pop(changed, False):
                changes.bump()

        def rolled_back(session: Session) -> None:  # the whole transaction: nothing moved
            session.info.pop(changed, None)

        event.listen(sessions, "after_flush", flushed)
        event.listen(sessions, "after_commit", committed)
        event.listen(sessions, "after_rollback", rolled_back)
        return changes

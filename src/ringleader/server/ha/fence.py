"""The fence: a server's epoch, checked in the database before every write commits.

See the package docstring for why this makes a split brain impossible. Here:
``Fence`` holds the epoch and how long it is good for on this server's clock;
``install`` hooks an engine so that each transaction that wrote checks it,
right before COMMIT, on its own connection.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, event

from ringleader.errors import RingleaderError

# Statements that change nothing: a transaction that ran only these commits unchecked.
_READS = re.compile(r"\s*(SELECT|SHOW|SET|BEGIN|SAVEPOINT|RELEASE|ROLLBACK|EXPLAIN)\b", re.I)
_WROTE = "ringleader.ha.wrote"
FENCE_SQL = "SELECT 1 FROM server_lease WHERE id = 1 AND epoch = %s FOR KEY SHARE"


class NotActive(RingleaderError):
    """This server is not the active one (a standby, or an active that lost its
    lease): it refuses to write. Answered as 503 with Retry-After and the active's
    URL (``gate``), which the ringleader client follows."""

    def __init__(self, message: str, active_url: str | None = None) -> None:
        super().__init__(message)
        self.active_url = active_url


class Fence:
    """The epoch this server holds and until when (its monotonic clock); None: none."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._epoch: int | None = None
        self._until = 0.0
        self.active_url: Callable[[], str | None] = lambda: None

    def grant(self, epoch: int, until: float) -> None:
        with self._lock:
            self._epoch, self._until = epoch, until

    def extend(self, epoch: int, until: float) -> None:
        """A renewal of ``epoch`` went through: good until ``until`` (never shortened)."""
        with self._lock:
            if self._epoch == epoch:
                self._until = max(self._until, until)

    def revoke(self, epoch: int | None = None) -> None:
        """No epoch any more (``epoch``: only if it is still that one)."""
        with self._lock:
            if epoch is None or self._epoch == epoch:
                self._epoch, self._until = None, 0.0

    def epoch(self) -> int | None:
        """The epoch, while its lease is good on this clock."""
        with self._lock:
            if self._epoch is not None and self._clock() < self._until:
                return self._epoch
            return None

    def lapsed(self) -> bool:
        """An epoch is held but its time is up (the watchdog's question)."""
        with self._lock:
            return self._epoch is not None and self._clock() >= self._until

    def check(self, dbapi_connection: Any) -> None:
        """Before a write commits: the lease row still carries our epoch, locked
        ``FOR KEY SHARE`` until the COMMIT (a take-over waits for it)."""
        epoch = self.epoch()
        if epoch is None:
            raise NotActive(self._refusal("it is not the active server"), self.active_url())
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(FENCE_SQL, (epoch,))
            held = cursor.fetchone() is not None
        finally:
            cursor.close()
        if not held:
            self.revoke(epoch)
            raise NotActive(
                self._refusal(f"its lease (epoch {epoch}) was taken by another server"),
                self.active_url(),
            )

    def _refusal(self, why: str) -> str:
        active = self.active_url()
        where = f"; the active server is {active}" if active else ""
        return f"this server cannot write: {why}{where} (retry there)"


def install(engine: Engine, fence: Fence) -> None:
    """Fence every write transaction on ``engine`` (see the module docstring)."""

    def mark(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if not _READS.match(statement):
            conn.info[_WROTE] = True

    def before_commit(conn: Any) -> None:
        if conn.info.pop(_WROTE, False):
            fence.check(conn.connection.dbapi_connection)

    def forget(conn: Any) -> None:
        conn.info.pop(_WROTE, None)

    event.listen(engine, "before_cursor_execute", mark)
    event.listen(engine, "commit", before_commit)
    event.listen(engine, "rollback", forget)
    event.listen(engine, "begin", forget)

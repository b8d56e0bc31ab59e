"""A short-lived memory of verified bearer tokens: who a token's digest names.

Why: every API request checks its token, and that check was a query joining
tokens, users and workloads, in a database session the request would otherwise
not open (GET /api/v1/me from 32 clients spent a fifth of the server's time
there).  A token seen a moment ago is answered from memory instead.

Nomenclature: an *entry* is a token digest's user (a detached copy of its row,
never attached to a session: ``auth.user_for_token`` merges it into the request's
session without a query) and the token's expiry; a *change* is a transaction
that wrote to ``users``, ``tokens`` or ``access_keys`` (a logout, a revoked key,
a deleted user, a user made admin or not), from any session or connection of
this process.

Invariants (the bound a revoked token is accepted within):

- a token revoked, a key deleted or a user changed **through this process** is
  refused from the moment that write commits: every change empties the memory
  when its first write statement runs and again when its connection goes back to
  the pool (after the commit), and no entry is stored while a change is open or
  by a lookup that began before a change ended (a lookup that read the old rows);
- a change made **by another process** on the same database (a second server, a
  standby, a script) is seen within ``TTL_S`` seconds: no entry is used after it
  is ``TTL_S`` old;
- an expired token is refused at once (its expiry is checked on every use);
- pod tokens are never remembered: they end with their workload's phase, which
  the query checks every time;
- at most ``MAX_ENTRIES`` entries (the oldest go first).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import Pool

TTL_S = 1.0
MAX_ENTRIES = 10_000
# Tables whose change can make a remembered answer wrong.
WATCHED = ("users", "tokens", "access_keys")
_CHANGING = "ringleader.token_cache.changing"  # on a connection's info while a change is open


@dataclass(frozen=True)
class Entry:
    user: Any  # a detached models.User: copied, read by merge, never changed
    expires_at: datetime
    stored_at: float


class TokenCache:
    """The memory of the module docstring; thread-safe."""

    def __init__(self, ttl_s: float = TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self.clock = ttl_s, clock
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._generation = 0  # moves at every change's start and end
        self._open = 0  # changes begun and not yet back in the pool

    def generation(self) -> int:
        """Taken before a lookup reads the database; ``put`` stores only if unchanged."""
        return self._generation

    def get(self, digest: str) -> Entry | None:
        entry = self._entries.get(digest)
        if entry is None:
            return None
        if self.clock() - entry.stored_at >= self.ttl_s:
            with self._lock:
                if self._entries.get(digest) is entry:
                    del self._entries[digest]
            return None
        return entry

    def put(self, digest: str, user: Any, expires_at: datetime, generation: int) -> None:
        """Remember ``digest``'s answer, read by a lookup that began at ``generation``."""
        with self._lock:
            if self._open or generation != self._generation:
                return  # a change ran meanwhile: what was read may be gone
            self._entries[digest] = Entry(user, expires_at, self.clock())
            self._entries.move_to_end(digest)
            while len(self._entries) > MAX_ENTRIES:
                self._entries.popitem(last=False)

    def change_began(self) -> None:
        with self._lock:
            self._open += 1
            self._generation += 1
            self._entries.clear()

    def change_ended(self) -> None:
        with self._lock:
            self._open = max(0, self._open - 1)
            self._generation += 1
            self._entries.clear()

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


CACHE = TokenCache()


# What ends a workload's pod tokens (``auth.revoke_pod_tokens``, at every start and
# end of a workload): pod tokens are never remembered, so it changes no answer here.
_POD_TOKENS_ONLY = "DELETE FROM TOKENS WHERE TOKENS.WORKLOAD_ID = "


def _writes_watched(statement: str) -> bool:
    """Whether a statement's text writes a watched table (its first words say so)."""
    head = statement.lstrip()[:80].upper()
    if not head.startswith(("UPDATE", "DELETE")):  # a new row changes no answer
        return False
    words = head.replace('"', " ").replace("`", " ").split()
    if not any(table.upper() in words[:4] for table in WATCHED):
        return False
    return not head.startswith(_POD_TOKENS_ONLY)


def _after_execute(conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
    if _writes_watched(statement) and not conn.info.get(_CHANGING):
        conn.info[_CHANGING] = True
        CACHE.change_began()


def _checked_in(_dbapi_connection: Any, record: Any) -> None:
    """A connection back in the pool: its transaction is over (committed or not)."""
    if record is not None and record.info.pop(_CHANGING, False):
        CACHE.change_ended()


def _invalidated(_dbapi_connection: Any, record: Any, *_rest: Any) -> None:
    _checked_in(_dbapi_connection, record)


_WATCHING = False


def watch() -> None:
    """Listen on every engine and pool of this process (idempotent): what makes the
    first invariant hold whoever writes."""
    global _WATCHING
    if _WATCHING:
        return
    event.listen(Engine, "after_cursor_execute", _after_execute)
    event.listen(Pool, "checkin", _checked_in)
    event.listen(Pool, "invalidate", _invalidated)
    event.listen(Pool, "soft_invalidate", _invalidated)
    _WATCHING = True

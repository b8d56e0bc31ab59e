"""Engine, sessions and UTC time for the control plane's database.

Nomenclature:
- *URL*: a SQLAlchemy database URL. SQLite (``sqlite:///<data_dir>/ringleader.db``)
  is the default; PostgreSQL is chosen by URL (``postgresql+psycopg://...``),
  from ``RINGLEADER_DATABASE_URL`` when set.
- *session*: an ORM ``Session`` from ``session_factory``; the caller owns its
  transaction (services commit, helpers such as ``phases.transition`` never do).

Invariants:
- Every SQLite connection runs with WAL (readers never block the writer),
  foreign keys ON (cascades and RESTRICT are enforced, as on PostgreSQL),
  ``busy_timeout`` 5 s (a writer waits for the lock instead of failing at
  once) and ``synchronous=NORMAL`` (durable at checkpoints; safe with WAL).
- SQLite write transactions start with ``BEGIN IMMEDIATE``: a transaction
  takes the write lock when it starts, so a read-then-write transaction can
  never fail mid-way with "database is locked" because another connection
  wrote in between (SQLite cannot upgrade a stale read snapshot; the busy
  timeout does not help there). Writers are serialised, which is what a small
  control plane's consistency needs; keep them short and never do I/O inside.
- A server opens a ``Database``: *writer* sessions and *reader* sessions. On
  SQLite the writer engine has exactly one connection, so the server's own
  writers queue in the pool (woken the moment the previous one commits)
  instead of in SQLite's busy handler, which sleeps in steps of up to 100 ms
  and made a burst of submissions wait a second or more; reader connections
  begin deferred transactions with ``query_only`` on, so listing never holds
  or waits for the write lock (WAL readers see the last committed snapshot).
  On PostgreSQL both are the same engine.
- Datetimes are timezone-aware UTC in Python, always. ``UTCDateTime`` rejects
  naive values on the way in and returns aware UTC values on the way out, on
  SQLite (which stores naive text) as on PostgreSQL (``timestamptz``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import DateTime, Engine, create_engine, event
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.types import TypeDecorator

DATABASE_URL_ENV = "RINGLEADER_DATABASE_URL"
SQLITE_BUSY_TIMEOUT_MS = 5000

# Run on every new SQLite connection, in this order: the busy timeout first so
# that switching to WAL waits for another process instead of failing.
_SQLITE_PRAGMAS = (
    f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA synchronous=NORMAL",
)


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (the only kind of datetime we store)."""
    return datetime.now(timezone.utc)


class UTCDateTime(TypeDecorator[datetime]):
    """A datetime column that holds UTC and always gives back aware UTC values.

    Why: SQLite keeps no zone at all and PostgreSQL returns values in the
    session's zone; comparing naive with aware datetimes raises, and a naive
    value is ambiguous. So naive input is a bug we refuse loudly, aware input
    is converted to UTC, and output is always aware UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: use an aware UTC datetime (db.utcnow())")
        value = value.astimezone(timezone.utc)
        # SQLite stores text without an offset: store naive UTC so text order is time order.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


def default_database_url(data_dir: Path) -> str:
    """The SQLite file the server uses when no URL is configured."""
    return f"sqlite:///{Path(data_dir) / 'ringleader.db'}"


def database_url(data_dir: Path) -> str:
    """``RINGLEADER_DATABASE_URL`` when set (and not empty), else the default SQLite file."""
    return os.environ.get(DATABASE_URL_ENV) or default_database_url(data_dir)


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


# How long a server thread waits for the one SQLite writer connection.
WRITER_WAIT_S = 60.0


def make_engine(url: str, *, read_only: bool = False, **kwargs: Any) -> Engine:
    """An engine for ``url`` with the settings our invariants need (see module doc).

    ``read_only`` (SQLite): deferred transactions on ``query_only`` connections.
    Extra keyword arguments go to ``create_engine`` (e.g. ``echo=True``).
    """
    if is_sqlite(url):
        engine = create_engine(url, **kwargs)
        pragmas = (*_SQLITE_PRAGMAS, "PRAGMA query_only=ON") if read_only else _SQLITE_PRAGMAS
        begin = "BEGIN" if read_only else "BEGIN IMMEDIATE"
        event.listen(engine, "connect", lambda conn, _record: _on_sqlite_connect(conn, pragmas))
        event.listen(engine, "begin", lambda conn: conn.exec_driver_sql(begin))
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def _on_sqlite_connect(dbapi_connection: Any, pragmas: tuple[str, ...]) -> None:
    # Take transaction control away from the sqlite3 module (it would BEGIN
    # lazily, before the first write only); the "begin" listener emits our own.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        for pragma in pragmas:
            cursor.execute(pragma)
    finally:
        cursor.close()


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions whose objects stay readable after commit (responses are built after it)."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@dataclass(frozen=True)
class Database:
    """A server's sessions: ``writer`` for anything that may write, ``reader``
    for requests and loop passes that only read (see the module doc)."""

    writer: sessionmaker[Session]
    reader: sessionmaker[Session]
    engines: tuple[Engine, ...]

    def dispose(self) -> None:
        for engine in self.engines:
            engine.dispose()


def open_database(url: str, connect_args: dict[str, Any] | None = None) -> Database:
    """The server's sessions on ``url``; ``connect_args`` (PostgreSQL): libpq settings
    for its connections (``server/ha`` names them and bounds a partition's hang)."""
    if not is_sqlite(url):
        engine = make_engine(url, connect_args=connect_args or {})
        return Database(session_factory(engine), session_factory(engine), (engine,))
    writer = make_engine(url, pool_size=1, max_overflow=0, pool_timeout=WRITER_WAIT_S)
    reader = make_engine(url, read_only=True)
    return Database(session_factory(writer), session_factory(reader), (writer, reader))

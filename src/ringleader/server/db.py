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
- SQLite transactions start with ``BEGIN IMMEDIATE``: a transaction takes the
  write lock when it starts, so a read-then-write transaction can never fail
  mid-way with "database is locked" because another connection wrote in
  between (SQLite cannot upgrade a stale read snapshot; the busy timeout does
  not help there). Transactions are serialised, which is what a small control
  plane's consistency needs; keep them short and never do I/O inside them.
- Datetimes are timezone-aware UTC in Python, always. ``UTCDateTime`` rejects
  naive values on the way in and returns aware UTC values on the way out, on
  SQLite (which stores naive text) as on PostgreSQL (``timestamptz``).
"""

from __future__ import annotations

import os
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


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for ``url`` with the settings our invariants need (see module doc).

    Extra keyword arguments go to ``create_engine`` (e.g. ``echo=True``).
    """
    if is_sqlite(url):
        engine = create_engine(url, **kwargs)
        event.listen(engine, "connect", _on_sqlite_connect)
        event.listen(engine, "begin", _on_sqlite_begin)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from the sqlite3 module (it would BEGIN
    # lazily, before the first write only); _on_sqlite_begin emits our own.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        for pragma in _SQLITE_PRAGMAS:
            cursor.execute(pragma)
    finally:
        cursor.close()


def _on_sqlite_begin(connection: Any) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions whose objects stay readable after commit (responses are built after it)."""
    return sessionmaker(bind=engine, expire_on_commit=False)

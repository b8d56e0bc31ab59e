"""Bring a database to the newest schema with Alembic, from code.

Nomenclature:
- *head*: the newest revision under ``migrations/versions``;
- *migration lock*: what keeps two starting servers from migrating the same
  database at once: an advisory lock on PostgreSQL, an ``flock`` on a file
  beside the SQLite database (``<db>.migrate.lock``).

Invariants:
- ``upgrade`` is idempotent and safe at every server start, from several
  processes at once: the second one waits for the lock, then finds the
  database at head and does nothing.
- All of one upgrade runs in one transaction (SQLite and PostgreSQL both have
  transactional DDL): a failed migration leaves the previous schema intact.
- On SQLite, foreign keys are OFF while migrating, because batch migrations
  drop and re-create tables and a DROP with foreign keys ON would cascade-delete
  the child rows; ``PRAGMA foreign_key_check`` must then come back empty.
- No ``alembic.ini`` is needed on disk: the Config is built here.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, event, text
from sqlalchemy.engine import make_url

from ringleader.server.db import make_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Any fixed 64-bit number; it only has to differ from other advisory locks in the same DB.
PG_ADVISORY_LOCK_KEY = 0x52494E474C454144  # "RINGLEAD"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config for our migrations; ``url`` is used when no connection is given."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.attributes["url"] = url
    return config


def head_revision() -> str:
    """The newest revision id in the package."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations under {MIGRATIONS_DIR}")
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision a database is at (None when it was never migrated)."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` to ``revision`` (default: head); see module doc."""
    sqlite = make_url(url).get_backend_name() == "sqlite"
    with _file_lock(_sqlite_lock_path(url)):
        engine = make_engine(url)
        if sqlite:
            event.listen(engine, "connect", _foreign_keys_off)
        try:
            with engine.begin() as connection:
                if not sqlite:
                    connection.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_ADVISORY_LOCK_KEY}
                    )
                config = alembic_config(url)
                config.attributes["connection"] = connection
                command.upgrade(config, revision)
                if sqlite:
                    _check_foreign_keys(connection)
        finally:
            engine.dispose()  # no connection with foreign keys OFF outlives this call


def _foreign_keys_off(dbapi_connection: Any, _record: Any) -> None:
    # Runs after db.make_engine's own connect listener, outside any transaction
    # (the pragma is a no-op inside one).
    dbapi_connection.execute("PRAGMA foreign_keys=OFF")


def _check_foreign_keys(connection: Connection) -> None:
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise RuntimeError(f"migration left rows with dangling foreign keys: {broken[:10]}")


def _sqlite_lock_path(url: str) -> Path | None:
    """``<db file>.migrate.lock`` for a file-backed SQLite URL, else None."""
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:"):  # a URI filename; in-memory or rare: no lock
        return None
    db_path = Path(database)
    return db_path.with_name(db_path.name + ".migrate.lock")


@contextlib.contextmanager
def _file_lock(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file is closed
        yield

"""Alembic environment for ringleader's schema, driven from code (``migrate.py``).

There is no ``alembic.ini``: the caller puts either an open ``connection``
(already inside a transaction, which the caller commits) or a ``url`` into
``config.attributes``; ``sqlalchemy.url`` in the main options is the fallback.
SQLite gets ``render_as_batch`` so later migrations can alter tables the only
way SQLite allows (copy, drop, rename).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from ringleader.server.db import make_engine
from ringleader.server.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: set config.attributes['url'] (see migrate.py)")
    return url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_offline() -> None:
    """Emit SQL to stdout instead of running it (``alembic upgrade --sql``)."""
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url())
    try:
        with engine.begin() as own:
            _configure(own)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()

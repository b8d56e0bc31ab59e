"""The declarative base and the column conventions every ORM table shares.

Why apart from ``models``: these are the rules a table is built by (constraint
names Alembic can alter, id and name lengths, Python-side defaults applied at
construction, the id and timestamp columns), not tables; keeping them here
leaves ``models`` to say what the control plane stores.  ``models`` re-exports
the public names, so ``from ringleader.server.models import Base, new_id`` still
works.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import MetaData, String, inspect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ringleader.server.db import UTCDateTime, utcnow

# Named constraints: Alembic's SQLite batch mode needs names to alter them later.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

ID_LENGTH = 12
NAME_LENGTH = 255
PHASE_LENGTH = 32


def new_id() -> str:
    """A short random id (48 bits): readable in URLs and logs, unique in practice."""
    return uuid.uuid4().hex[:ID_LENGTH]


class Base(DeclarativeBase):
    """Declarative base whose constructor applies Python-side column defaults at once.

    Why: a new row then has its id, phase and counters before it is flushed,
    so services and ``phases.transition`` can use them on a pending object.
    """

    metadata = MetaData(naming_convention=NAMING_CONVENTION)

    def __init__(self, **kwargs: Any) -> None:
        cls = type(self)
        for key, value in kwargs.items():
            if not hasattr(cls, key):
                raise TypeError(f"{key!r} is an invalid keyword argument for {cls.__name__}")
            setattr(self, key, value)
        for prop in inspect(cls).column_attrs:
            default = prop.columns[0].default
            if prop.key in kwargs or default is None:
                continue
            if default.is_callable:
                setattr(self, prop.key, default.arg(None))
            elif default.is_scalar:
                setattr(self, prop.key, default.arg)


def id_column() -> Mapped[str]:
    """A domain id primary key, filled by ``new_id`` when the row is constructed."""
    return mapped_column(String(32), primary_key=True, default=new_id)


def created_at_column() -> Mapped[datetime]:
    """When the row was made (aware UTC)."""
    return mapped_column(UTCDateTime(), default=utcnow)


def updated_at_column() -> Mapped[datetime]:
    """When the row last changed (aware UTC), bumped by every UPDATE of it."""
    return mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)

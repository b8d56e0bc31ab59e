"""The ``server_lease`` table: which of several servers on one database is active.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29

Why: two servers on one PostgreSQL database elect one active through this row
(``server/ha``): its ``epoch`` is the fencing token every write of the active
checks before it commits, so a server whose lease was taken cannot write.  The
row itself is made by the first server that asks for the lease (an empty table
is "nobody holds it"); on SQLite the table stays empty (one server per file).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "server_lease",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("url", sa.String(500), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_server_lease")),
    )


def downgrade() -> None:
    op.drop_table("server_lease")

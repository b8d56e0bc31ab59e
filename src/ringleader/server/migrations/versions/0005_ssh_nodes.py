"""Registered SSH nodes: where to log in, and what the last probe found there.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("ssh", sa.String(255), nullable=False, server_default=""))
        batch.add_column(sa.Column("facts", sa.JSON(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("facts")
        batch.drop_column("ssh")

"""A submission's ``Idempotency-Key`` and the digest of its body, on the workload row,
with a unique index per submitter.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29

Why: a client whose POST got no answer (a timeout, a dropped connection, a server
restarting) cannot know whether the workload was made; sent again with the same key,
the submission answers as the first did instead of making a second workload
(``services/idempotency.py``).  The index makes two racing retries one row; NULLs
(submissions without a key, and every existing row) never collide in it, on SQLite
or PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "uq_workloads_created_by_idempotency_key"


def upgrade() -> None:
    with op.batch_alter_table("workloads") as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(200), nullable=True))
        batch.add_column(sa.Column("request_digest", sa.String(64), nullable=True))
    op.create_index(INDEX, "workloads", ["created_by", "idempotency_key"], unique=True)


def downgrade() -> None:
    op.drop_index(INDEX, table_name="workloads")
    with op.batch_alter_table("workloads") as batch:
        batch.drop_column("request_digest")
        batch.drop_column("idempotency_key")

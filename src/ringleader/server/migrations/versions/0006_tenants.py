"""Tenants: member roles, named and revocable access keys, workload tokens,
per-user OS accounts, and what the OS measured of each pod.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("os_user", sa.String(255), nullable=True))
    with op.batch_alter_table("project_members") as batch:
        batch.add_column(
            sa.Column("role", sa.String(32), nullable=False, server_default="researcher")
        )
    with op.batch_alter_table("access_keys") as batch:
        batch.add_column(sa.Column("name", sa.String(255), nullable=False, server_default=""))
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("access_key_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("workload_id", sa.String(32), nullable=True))
        batch.create_index("ix_tokens_access_key_id", ["access_key_id"])
        batch.create_index("ix_tokens_workload_id", ["workload_id"])
        batch.create_foreign_key(
            "fk_tokens_access_key_id_access_keys",
            "access_keys",
            ["access_key_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch.create_foreign_key(
            "fk_tokens_workload_id_workloads",
            "workloads",
            ["workload_id"],
            ["id"],
            ondelete="CASCADE",
        )
    with op.batch_alter_table("pods") as batch:
        batch.add_column(sa.Column("peak_memory_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("cpu_seconds", sa.Float(), nullable=True))
        batch.add_column(sa.Column("isolation", sa.String(32), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("pods") as batch:
        batch.drop_column("isolation")
        batch.drop_column("cpu_seconds")
        batch.drop_column("peak_memory_bytes")
    with op.batch_alter_table("tokens") as batch:
        batch.drop_constraint("fk_tokens_workload_id_workloads", type_="foreignkey")
        batch.drop_constraint("fk_tokens_access_key_id_access_keys", type_="foreignkey")
        batch.drop_index("ix_tokens_workload_id")
        batch.drop_index("ix_tokens_access_key_id")
        batch.drop_column("workload_id")
        batch.drop_column("access_key_id")
    with op.batch_alter_table("access_keys") as batch:
        batch.drop_column("name")
    with op.batch_alter_table("project_members") as batch:
        batch.drop_column("role")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("os_user")

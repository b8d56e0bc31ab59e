"""Workload assets: environments and compute resources, per project or for everyone.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = sa.String(length=255)
KIND = sa.String(length=32)


def _time(name: str) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "assets",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("kind", KIND, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("description", NAME, nullable=True),
        sa.Column("scope", KIND, nullable=False),
        sa.Column("project_id", sa.String(length=32), nullable=True),
        sa.Column("cluster_id", NAME, nullable=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("created_by", NAME, nullable=False),
        sa.Column("updated_by", NAME, nullable=False),
        sa.Column("update_count", sa.Integer(), nullable=False),
        _time("created_at"),
        _time("updated_at"),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name="fk_assets_project_id_projects",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_assets"),
    )
    op.create_index("ix_assets_project_id", "assets", ["project_id"])
    # A name is unique per kind in its project, and among the assets every project sees.
    scoped = sa.text("project_id IS NOT NULL")
    op.create_index(
        "uq_assets_kind_project_id_name",
        "assets",
        ["kind", "project_id", "name"],
        unique=True,
        sqlite_where=scoped,
        postgresql_where=scoped,
    )
    everywhere = sa.text("project_id IS NULL")
    op.create_index(
        "uq_assets_kind_name_everywhere",
        "assets",
        ["kind", "name"],
        unique=True,
        sqlite_where=everywhere,
        postgresql_where=everywhere,
    )


def downgrade() -> None:
    op.drop_index("uq_assets_kind_name_everywhere", table_name="assets")
    op.drop_index("uq_assets_kind_project_id_name", table_name="assets")
    op.drop_index("ix_assets_project_id", table_name="assets")
    op.drop_table("assets")

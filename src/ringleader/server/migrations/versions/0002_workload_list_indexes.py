"""Indexes for the workload list's sorts and its commonest filter.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21

``GET /api/v1/workloads`` sorts by name or by creation time and filters by
phase; without these a page of 50 out of 10,000 rows sorted the whole table.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_workloads_name_id", "workloads", ["name", "id"])
    op.create_index("ix_workloads_phase_created_at", "workloads", ["phase", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_workloads_phase_created_at", table_name="workloads")
    op.drop_index("ix_workloads_name_id", table_name="workloads")

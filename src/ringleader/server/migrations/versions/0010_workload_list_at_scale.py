"""The workloads list at 100,000 rows (issue 27, item 2): partial indexes on live rows.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29

Why: ``GET /api/v1/workloads`` always asks for live rows (``deleted_at IS
NULL``) and returns the total of its filter. Filtered by phase, by project or
by both, that total was counted by visiting every matching row in the table to
check ``deleted_at`` (14 ms for 20,000 rows); an index that holds only live
rows and every filtered column answers the count from the index alone (under
1 ms), and serves the page newest first. ``(phase, name)`` serves a phase
filter sorted by name, which SQLite otherwise sorted whole (16 ms). The full ``(phase, created_at)``
index of 0002 is superseded by the first (no query reads deleted rows by phase
and creation time; ``ix_workloads_phase`` stays for the loops), so it goes.

Adding indexes keeps every row: nothing else changes (a test checks a database
made at 0009 keeps its rows and answers the same list).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LIVE = sa.text("deleted_at IS NULL")
INDEXES = {
    "ix_workloads_live_phase_created_at": ["phase", "created_at", "id"],
    "ix_workloads_live_project_id_phase_created_at": ["project_id", "phase", "created_at", "id"],
    "ix_workloads_live_project_id_created_at": ["project_id", "created_at", "id"],
    "ix_workloads_live_phase_name": ["phase", "name", "id"],
}


def upgrade() -> None:
    for name, columns in INDEXES.items():
        op.create_index(name, "workloads", columns, sqlite_where=LIVE, postgresql_where=LIVE)
    op.drop_index("ix_workloads_phase_created_at", table_name="workloads")


def downgrade() -> None:
    op.create_index("ix_workloads_phase_created_at", "workloads", ["phase", "created_at"])
    for name in reversed(INDEXES):
        op.drop_index(name, table_name="workloads")

"""An index on pods.phase: each loop tick looks up the running pods of ended workloads.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_pods_phase", "pods", ["phase"])


def downgrade() -> None:
    op.drop_index("ix_pods_phase", table_name="pods")

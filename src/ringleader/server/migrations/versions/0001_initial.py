"""Initial schema: projects, users, membership, access keys, tokens, workloads, pods, events.

Revision ID: 0001
Revises:
Create Date: 2026-11-21

Written out in full (not importing models.py) so it stays what it was when
later revisions change the models. Datetimes are ``timestamptz`` on
PostgreSQL and text on SQLite; ``db.UTCDateTime`` keeps both UTC.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(length=32)
NAME = sa.String(length=255)
PHASE = sa.String(length=32)
LIVE = sa.text("deleted_at IS NULL")


def _time(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("resources", sa.JSON(), nullable=False),
        _time("created_at"),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_projects"),
        sa.UniqueConstraint("name", name="uq_projects_name"),
    )
    op.create_table(
        "users",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        _time("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("name", name="uq_users_name"),
    )
    op.create_table(
        "project_members",
        sa.Column("project_id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name="fk_project_members_project_id_projects",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_project_members_user_id_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("project_id", "user_id", name="pk_project_members"),
    )
    op.create_index("ix_project_members_user_id", "project_members", ["user_id"])
    op.create_table(
        "access_keys",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("client_id", NAME, nullable=False),
        sa.Column("secret_hash", NAME, nullable=False),
        _time("created_at"),
        _time("last_used_at", nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_access_keys_user_id_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_access_keys"),
        sa.UniqueConstraint("client_id", name="uq_access_keys_client_id"),
    )
    op.create_index("ix_access_keys_user_id", "access_keys", ["user_id"])
    op.create_table(
        "tokens",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("token_hash", NAME, nullable=False),
        _time("created_at"),
        _time("expires_at"),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_tokens_user_id_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_tokens"),
    )
    op.create_index("ix_tokens_token_hash", "tokens", ["token_hash"], unique=True)
    op.create_index("ix_tokens_user_id", "tokens", ["user_id"])
    op.create_table(
        "workloads",
        sa.Column("id", ID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("project_id", ID, nullable=False),
        sa.Column("created_by", ID, nullable=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("spec_version", sa.Integer(), nullable=False),
        sa.Column("framework", PHASE, nullable=False),
        sa.Column("desired_phase", PHASE, nullable=False),
        sa.Column("phase", PHASE, nullable=False),
        sa.Column("phase_reason", NAME, nullable=False),
        sa.Column("phase_message", sa.Text(), nullable=False),
        sa.Column("backend", PHASE, nullable=False),
        sa.Column("handle", NAME, nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        _time("created_at"),
        _time("started_at", nullable=True),
        _time("completed_at", nullable=True),
        _time("updated_at"),
        _time("deleted_at", nullable=True),
        sa.ForeignKeyConstraint(
            ["created_by"], ["users.id"], name="fk_workloads_created_by_users", ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name="fk_workloads_project_id_projects",
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_workloads"),
    )
    op.create_index("ix_workloads_created_at", "workloads", ["created_at"])
    op.create_index("ix_workloads_created_by", "workloads", ["created_by"])
    op.create_index("ix_workloads_phase", "workloads", ["phase"])
    # A live workload's name is unique in its project; soft-deleted rows free it.
    op.create_index(
        "uq_workloads_project_id_name_live",
        "workloads",
        ["project_id", "name"],
        unique=True,
        sqlite_where=LIVE,
        postgresql_where=LIVE,
    )
    op.create_table(
        "pods",
        sa.Column("id", ID, nullable=False),
        sa.Column("workload_id", ID, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("role", PHASE, nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("node", NAME, nullable=False),
        sa.Column("phase", PHASE, nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("ranks", sa.JSON(), nullable=False),
        _time("created_at"),
        _time("started_at", nullable=True),
        _time("completed_at", nullable=True),
        _time("updated_at"),
        sa.ForeignKeyConstraint(
            ["workload_id"],
            ["workloads.id"],
            name="fk_pods_workload_id_workloads",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_pods"),
        sa.UniqueConstraint("workload_id", "name", name="uq_pods_workload_id_name"),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("workload_id", ID, nullable=False),
        sa.Column("pod_name", NAME, nullable=True),
        _time("time"),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("from_phase", PHASE, nullable=True),
        sa.Column("to_phase", PHASE, nullable=True),
        sa.Column("reason", NAME, nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["workload_id"],
            ["workloads.id"],
            name="fk_events_workload_id_workloads",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
    )
    op.create_index("ix_events_time", "events", ["time"])
    op.create_index("ix_events_workload_id", "events", ["workload_id"])


def downgrade() -> None:
    for table in (
        "events",
        "pods",
        "workloads",
        "tokens",
        "access_keys",
        "project_members",
        "users",
        "projects",
    ):
        op.drop_table(table)  # drops its indexes with it

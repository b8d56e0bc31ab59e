"""What each workload's spec asks for in all (pods, GPUs, CPU cores) and how many of
its pods are Running, stored on its row with an index each: the list sorts by them.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24

Why: the workloads table sorts by its Pods, GPU and CPU columns in SQL, over
any number of rows; the requested figures are fixed by the spec at submit, so
they are stored once (``services.workloads.requested``) rather than computed
from JSON on every sort, and ``running_pods`` is kept by ``phases``, the one
writer of pod phases.  Existing rows are filled here: the requests from their
stored spec by that same function, the Running pods counted, a batch of rows
at a time (bounded memory whatever the table's size).  A spec that no longer
parses keeps 0: it sorts first, and the upgrade of a server never fails over
one old row.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 500
COLUMNS = (
    ("running_pods", sa.Integer()),
    ("requested_pods", sa.Integer()),
    ("requested_gpus", sa.Float()),
    ("requested_cpu_cores", sa.Float()),
)
log = logging.getLogger("alembic.runtime.migration")


def upgrade() -> None:
    with op.batch_alter_table("workloads") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=False, server_default="0"))
    for name, _ in COLUMNS:
        op.create_index(f"ix_workloads_{name}_id", "workloads", [name, "id"])
    backfill(op.get_bind())


def backfill(connection: sa.Connection) -> None:
    """Each row's figures from its spec and pods, ``BATCH`` rows at a time in id order."""
    from ringleader.server.services.workloads import requested  # the code submit uses
    from ringleader.spec import WorkloadSpec

    table = sa.table(
        "workloads",
        sa.column("id", sa.String()),
        sa.column("spec", sa.JSON()),
        sa.column("running_pods", sa.Integer()),
        sa.column("requested_pods", sa.Integer()),
        sa.column("requested_gpus", sa.Float()),
        sa.column("requested_cpu_cores", sa.Float()),
    )
    pods = sa.table("pods", sa.column("workload_id", sa.String()), sa.column("phase", sa.String()))
    fill = (
        sa.update(table)
        .where(table.c.id == sa.bindparam("row_id"))
        .values(
            running_pods=sa.bindparam("running"),
            requested_pods=sa.bindparam("pods"),
            requested_gpus=sa.bindparam("gpus"),
            requested_cpu_cores=sa.bindparam("cpu"),
        )
    )
    last = ""
    while True:
        rows = connection.execute(
            sa.select(table.c.id, table.c.spec)
            .where(table.c.id > last)
            .order_by(table.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        running = dict(
            connection.execute(
                sa.select(pods.c.workload_id, sa.func.count())
                .where(pods.c.workload_id.in_([r[0] for r in rows]), pods.c.phase == "Running")
                .group_by(pods.c.workload_id)
            ).all()
        )
        values = []  # a dict per row: bounded by BATCH
        for row_id, spec in rows:
            try:
                figures = requested(WorkloadSpec.from_stored(spec))
            except Exception as error:  # one bad old row must not stop an upgrade
                log.warning("workload %s: spec does not parse, requests left 0: %s", row_id, error)
                figures = dict.fromkeys((name for name, _ in COLUMNS), 0)
            values.append(
                {
                    "row_id": row_id,
                    "running": running.get(row_id, 0),
                    "pods": figures["requested_pods"],
                    "gpus": figures["requested_gpus"],
                    "cpu": figures["requested_cpu_cores"],
                }
            )
        connection.execute(fill, values)
        last = rows[-1][0]


def downgrade() -> None:
    for name, _ in reversed(COLUMNS):
        op.drop_index(f"ix_workloads_{name}_id", table_name="workloads")
    with op.batch_alter_table("workloads") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)

"""Migration 0010 on SQLite and real PostgreSQL: a database made at 0009 keeps every
row and answers the same workloads list with the new partial indexes, and on SQLite
the list's counts are answered from them (EXPLAIN QUERY PLAN)."""

from __future__ import annotations

import random
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy.orm import Session

from ringleader.server import db
from ringleader.server.migrate import alembic_config, upgrade
from ringleader.server.models import User
from ringleader.server.services.workload_list import list_workloads
from tests.fixtures.postgres import db_url, pg_url, postgres_server, postgres_url  # noqa: F401
from tests.server.list_rows import fill

NEW = {
    "ix_workloads_live_phase_created_at",
    "ix_workloads_live_project_id_phase_created_at",
    "ix_workloads_live_project_id_created_at",
    "ix_workloads_live_phase_name",
}
QUERIES: list[dict[str, Any]] = [
    {},
    {"filters": ["phase==Failed"]},
    {"filters": ["phase==Running"], "sort_by": "name", "sort_order": "asc"},
    {"filters": ["projectName==team-a", "phase!=Completed"], "offset": 5, "limit": 20},
    {"sort_by": "runningPods", "offset": 30},
]


def _snapshot(engine: sa.Engine) -> dict[str, Any]:
    """Every row of the tables the migration touches, and the list's answers."""
    with engine.connect() as conn:
        tables = {
            name: sorted(
                tuple(map(str, row)) for row in conn.execute(sa.text(f"SELECT * FROM {name}"))
            )
            for name in ("projects", "users", "project_members", "workloads")
        }
    with Session(engine) as session:
        lists = {}
        for name in ("admin", "researcher"):
            user = session.scalar(sa.select(User).where(User.name == name))
            assert user is not None
            for i, query in enumerate(QUERIES):
                rows, total = list_workloads(session, user, **query)
                lists[name, i] = ([w.id for w in rows], total)
    return {"tables": tables, "lists": lists}


def _indexes(engine: sa.Engine) -> set[str]:
    with engine.connect() as conn:
        return {str(i["name"]) for i in sa.inspect(conn).get_indexes("workloads")}


def test_a_database_at_0009_keeps_its_rows_and_its_list(db_url: str) -> None:  # noqa: F811
    upgrade(db_url, "0009")
    engine = db.make_engine(db_url)
    try:
        with engine.begin() as conn:
            rows = fill(conn, random.Random(10), 300)
        assert any(w["deleted_at"] for w in rows.workloads)
        before = _snapshot(engine)
        assert "ix_workloads_phase_created_at" in _indexes(engine)
        upgrade(db_url, "0010")
        assert _indexes(engine) >= NEW
        assert "ix_workloads_phase_created_at" not in _indexes(engine)  # superseded
        after = _snapshot(engine)
        assert after == before
        assert sum(len(ids) for ids, _ in after["lists"].values()) > 100  # not all empty
        # and back: downgrade restores 0009's indexes, rows untouched
        config = alembic_config(db_url)
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0009")
        assert not NEW & _indexes(engine)
        assert "ix_workloads_phase_created_at" in _indexes(engine)
        assert _snapshot(engine) == before
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        (["phase==Failed"], "ix_workloads_live_phase_created_at"),
        (["projectId==P", "phase==Failed"], "ix_workloads_live_project_id_phase_created_at"),
        (["projectId==P"], "ix_workloads_live_project_id_created_at"),
    ],
)
def test_sqlite_counts_a_filtered_list_in_an_index_alone(
    tmp_path: Any, filters: list[str], index: str
) -> None:
    """The total of a filtered page is a COVERING index search: no row is read to check
    ``deleted_at`` (what made it cost 14 ms at 20,000 matches)."""
    url = f"sqlite:///{tmp_path / 'list.db'}"
    upgrade(url)
    engine = db.make_engine(url)
    seen: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, params: Any, *_rest: Any) -> None:
        seen.append((statement, params))

    try:
        with engine.begin() as conn:
            fill(conn, random.Random(3), 50)
        sa.event.listen(engine, "before_cursor_execute", capture)
        with Session(engine) as session:
            admin = session.scalar(sa.select(User).where(User.name == "admin"))
            assert admin is not None
            list_workloads(session, admin, filters=[f.replace("P", "p0") for f in filters])
        sa.event.remove(engine, "before_cursor_execute", capture)
        count, params = next((s, p) for s, p in seen if "count(*)" in s)
        with engine.connect() as conn:
            plan = " ".join(
                str(row[-1]) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + count, params)
            )
            table = conn.exec_driver_sql(
                "SELECT rootpage FROM sqlite_master WHERE name = 'workloads'"
            ).scalar()
            ops = conn.exec_driver_sql("EXPLAIN " + count, params).fetchall()
    finally:
        engine.dispose()
    assert f"USING INDEX {index} " in plan or f"COVERING INDEX {index} " in plan, plan
    # The table may be opened (a deferred seek), but no column of it is ever read.
    cursors = {op[2] for op in ops if op[1] == "OpenRead" and op[3] == table}
    assert not [op for op in ops if op[1] in ("Column", "Rowid") and op[2] in cursors], ops

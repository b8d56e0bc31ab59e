"""The workloads list (``workload_list.list_workloads``) against a naive Python filter,
on SQLite and real PostgreSQL: for random filters, sorts, orders and pages the same
rows in the same order and the same total, for an admin and for a researcher who
sees two of four projects (issue 27, item 2: the indexes and queries may change,
the answers may not)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.server import db
from ringleader.server.migrate import upgrade
from ringleader.server.models import User
from ringleader.server.services.workload_list import list_workloads
from tests.fixtures.postgres import db_url, pg_url, postgres_server, postgres_url  # noqa: F401
from tests.server.list_rows import KEYS, LETTERS, PHASES, SORT_KEYS, T0, Rows, fill, naive

ROWS = 400


@pytest.fixture
def filled(db_url: str) -> Iterator[tuple[Any, Rows]]:  # noqa: F811
    """A migrated database holding ``ROWS`` random workloads."""
    upgrade(db_url)
    engine = db.make_engine(db_url)
    with engine.begin() as conn:
        rows = fill(conn, random.Random(20261129), ROWS)
    try:
        yield engine, rows
    finally:
        engine.dispose()


def _term(rows: Rows) -> st.SearchStrategy[tuple[str, str, Any]]:
    """One ``(field, op, value)`` filter term a user could send."""
    names = [w["name"] for w in rows.workloads]
    return st.one_of(
        st.tuples(st.just("phase"), st.sampled_from(["==", "!="]), st.sampled_from(PHASES)),
        st.tuples(st.just("projectId"), st.just("=="), st.sampled_from(sorted(rows.projects))),
        st.tuples(
            st.just("projectName"), st.sampled_from(["==", "!="]), st.sampled_from(["team-a"])
        ),
        st.tuples(st.just("name"), st.just("=@"), st.text(LETTERS, min_size=1, max_size=2)),
        st.tuples(st.just("name"), st.sampled_from(["<=", ">="]), st.sampled_from(names)),
        st.tuples(st.just("framework"), st.just("=="), st.sampled_from(["PyTorch", "MPI"])),
        st.tuples(
            st.just("createdBy"), st.sampled_from(["==", "!="]), st.sampled_from(["admin", "other"])
        ),
        st.tuples(
            st.just("createdAt"),
            st.sampled_from(["<=", ">="]),
            st.integers(0, ROWS // 2).map(lambda m: T0 + timedelta(minutes=m)),
        ),
    )


def _wire(term: tuple[str, str, Any]) -> str:
    field, op, value = term
    text = value.isoformat() if field == "createdAt" else value
    return f"{field}{op}{text}"


def test_the_list_answers_what_a_naive_filter_answers(filled: tuple[Any, Rows]) -> None:
    engine, rows = filled
    nulls_first = engine.dialect.name == "sqlite"  # PostgreSQL sorts NULL as the largest
    assert set(KEYS) <= set(SORT_KEYS)

    @settings(
        max_examples=150,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        admin=st.booleans(),
        terms=st.lists(_term(rows), max_size=3),
        sort_by=st.sampled_from(sorted(SORT_KEYS)),
        order=st.sampled_from(["asc", "desc"]),
        offset=st.sampled_from([0, 0, 7, 50, 180, ROWS]),
        limit=st.sampled_from([1, 10, 50, 500]),
    )
    def check(
        admin: bool,
        terms: list[tuple[str, str, Any]],
        sort_by: str,
        order: str,
        offset: int,
        limit: int,
    ) -> None:
        with Session(engine) as session:
            user = session.scalar(
                select(User).where(User.name == ("admin" if admin else "researcher"))
            )
            assert user is not None
            got, total = list_workloads(
                session,
                user,
                filters=[_wire(t) for t in terms],
                sort_by=sort_by,
                sort_order=order,
                offset=offset,
                limit=limit,
            )
        expected, expected_total = naive(
            rows,
            admin=admin,
            filters=terms,
            sort_by=sort_by,
            order=order,
            offset=offset,
            limit=limit,
            nulls_first_ascending=nulls_first,
        )
        assert total == expected_total
        assert [w.id for w in got] == expected

    check()


def test_the_naive_filter_is_not_vacuous(filled: tuple[Any, Rows]) -> None:
    """The comparison above means something: the data has ties, deleted rows, NULL
    completion times and creators, and filters that keep some rows but not all."""
    _engine, rows = filled
    live = [w for w in rows.workloads if w["deleted_at"] is None]
    assert len(live) < ROWS  # some are soft-deleted
    assert len({w["created_at"] for w in live}) < len(live)  # ties on the default sort
    assert any(w["completed_at"] is None for w in live)
    assert any(w["created_by"] is None for w in live)
    _failed, total = naive(
        rows,
        admin=False,
        filters=[("phase", "==", "Failed")],
        sort_by="createdAt",
        order="desc",
        offset=0,
        limit=ROWS,
        nulls_first_ascending=True,
    )
    assert 0 < total < len(live)

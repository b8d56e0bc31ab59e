"""The database layer on SQLite and real PostgreSQL: migrations, pragmas, constraints, time."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import delete, func, inspect, select, text
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session, sessionmaker

from ringleader.server import db
from ringleader.server.migrate import current_revision, head_revision, upgrade
from ringleader.server.models import (
    AccessKey,
    Base,
    Event,
    Pod,
    Project,
    ProjectMember,
    Token,
    User,
    Workload,
)
from tests.fixtures.postgres import db_url, pg_url, postgres_server, postgres_url  # noqa: F401

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
TABLES = {
    "projects",
    "users",
    "project_members",
    "access_keys",
    "tokens",
    "workloads",
    "pods",
    "events",
    "nodes",
    "assets",
    "server_lease",  # the standby election (server/ha)
}


@pytest.fixture
def sessions(db_url: str) -> Iterator[sessionmaker[Session]]:  # noqa: F811
    """A migrated fresh database of each kind and a session factory on it."""
    upgrade(db_url)
    engine = db.make_engine(db_url)
    yield db.session_factory(engine)
    engine.dispose()


def _workload(project: Project, name: str = "train", **fields: object) -> Workload:
    return Workload(
        project=project, name=name, spec={"command": "true"}, framework="pytorch", **fields
    )


# ----- migrations -----------------------------------------------------------------


def test_migrations_create_exactly_the_models(db_url: str) -> None:  # noqa: F811
    upgrade(db_url)
    upgrade(db_url)  # every server start calls it: the second run changes nothing
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            assert current_revision(conn) == head_revision()
            assert set(inspect(conn).get_table_names()) == TABLES | {"alembic_version"}
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
            live = [
                ix
                for ix in inspect(conn).get_indexes("workloads")
                if ix["name"] == "uq_workloads_project_id_name_live"
            ]
            assert live and live[0]["unique"] and live[0]["column_names"] == ["project_id", "name"]
    finally:
        engine.dispose()


def _upgrade_after(barrier: multiprocessing.synchronize.Barrier, url: str) -> None:
    barrier.wait()
    upgrade(url)


def test_concurrent_upgrades_from_several_processes(db_url: str) -> None:  # noqa: F811
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(4)
    procs = [spawn.Process(target=_upgrade_after, args=(barrier, db_url)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            assert current_revision(conn) == head_revision()
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
            versions = conn.execute(text("SELECT count(*) FROM alembic_version")).scalar_one()
            assert versions == 1
    finally:
        engine.dispose()


def test_migrations_are_packaged_next_to_the_code() -> None:
    from ringleader.server import migrate

    assert (migrate.MIGRATIONS_DIR / "env.py").is_file()
    assert (migrate.MIGRATIONS_DIR / "script.py.mako").is_file()
    newest = max(p.name for p in (migrate.MIGRATIONS_DIR / "versions").glob("0*.py"))
    assert head_revision() == newest[:4]  # one head: the newest file, numbered in order


# ----- engine settings --------------------------------------------------------------


def test_sqlite_connections_have_wal_foreign_keys_and_busy_timeout(tmp_path: Path) -> None:
    engine = db.make_engine(db.default_database_url(tmp_path))
    try:
        with engine.connect() as conn:
            pragma = lambda name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()  # noqa: E731
            assert pragma("journal_mode") == "wal"
            assert pragma("foreign_keys") == 1
            assert pragma("busy_timeout") == db.SQLITE_BUSY_TIMEOUT_MS
            assert pragma("synchronous") == 1  # NORMAL
    finally:
        engine.dispose()
    assert (tmp_path / "ringleader.db").exists()


def test_sqlite_transactions_take_the_write_lock_when_they_begin(tmp_path: Path) -> None:
    url = db.default_database_url(tmp_path)
    upgrade(url)
    engine = db.make_engine(url)
    try:
        with db.session_factory(engine)() as session:
            session.execute(select(Project)).all()  # a read opens the transaction
            other = sqlite3.connect(tmp_path / "ringleader.db", timeout=0, isolation_level=None)
            try:
                with pytest.raises(sqlite3.OperationalError, match="locked"):
                    other.execute("BEGIN IMMEDIATE")
                session.rollback()
                other.execute("BEGIN IMMEDIATE")  # free again once the session's transaction ends
                other.execute("ROLLBACK")
            finally:
                other.close()
    finally:
        engine.dispose()


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Iterator[db.Database]:
    """A server's writer and reader sessions on a fresh migrated SQLite file."""
    url = db.default_database_url(tmp_path)
    upgrade(url)
    database = db.open_database(url)
    yield database
    database.dispose()


def test_sqlite_readers_never_take_or_wait_for_the_write_lock(
    sqlite_database: db.Database,
) -> None:
    with sqlite_database.writer() as writer, sqlite_database.reader() as reader:
        writer.add(Project(name="held", resources=[]))
        writer.flush()  # the writer holds the write lock, uncommitted
        names = set(reader.scalars(select(Project.name)))  # no wait: the last snapshot
        assert "held" not in names
        reader.add(Project(name="sneaky", resources=[]))
        with pytest.raises(StatementError, match="readonly"):
            reader.flush()  # query_only: a reader session cannot write
        reader.rollback()
        writer.commit()
    with sqlite_database.reader() as reader:
        assert "held" in set(reader.scalars(select(Project.name)))


def test_sqlite_writers_of_one_server_queue_for_one_connection(
    sqlite_database: db.Database,
) -> None:
    """Many threads writing at once all succeed, none waits in SQLite's busy handler."""
    import threading

    failures: list[BaseException] = []

    def write(i: int) -> None:
        try:
            with sqlite_database.writer() as s, s.begin():
                s.scalar(select(func.count()).select_from(Project))  # read, then write
                s.add(Project(name=f"p{i}", resources=[]))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with sqlite_database.reader() as s:
        assert s.scalar(select(func.count()).select_from(Project)) == 32
    writer_pool = sqlite_database.engines[0].pool
    assert writer_pool.size() == 1 and writer_pool.overflow() <= 0


def test_database_url_comes_from_the_environment_when_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(db.DATABASE_URL_ENV, raising=False)
    assert db.database_url(tmp_path) == f"sqlite:///{tmp_path}/ringleader.db"
    monkeypatch.setenv(db.DATABASE_URL_ENV, "postgresql+psycopg://u@h/d")
    assert db.database_url(tmp_path) == "postgresql+psycopg://u@h/d"
    assert not db.is_sqlite(db.database_url(tmp_path))


def test_postgres_engine_pings_before_use(postgres_url: str) -> None:  # noqa: F811
    engine = db.make_engine(postgres_url)
    try:
        assert engine.pool._pre_ping  # type: ignore[attr-defined]
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()


# ----- constraints ---------------------------------------------------------------------


def test_live_workload_names_are_unique_per_project_deleted_ones_free_the_name(
    sessions: sessionmaker[Session],
) -> None:
    with sessions() as s, s.begin():
        project, other = Project(name="p"), Project(name="q")
        s.add_all([project, other, _workload(project), _workload(other)])
    with sessions() as s, pytest.raises(IntegrityError):
        s.add(_workload(s.get(Project, project.id)))
        s.commit()
    with sessions() as s, s.begin():
        first = s.scalars(select(Workload).where(Workload.project_id == project.id)).one()
        first.deleted_at = db.utcnow()
    with sessions() as s, s.begin():
        s.add(_workload(s.get(Project, project.id)))  # the name is free again
    with sessions() as s, s.begin():
        second = s.scalars(
            select(Workload).where(Workload.project_id == project.id, Workload.deleted_at.is_(None))
        ).one()
        second.deleted_at = db.utcnow()  # two deleted ones with one name may coexist
    with sessions() as s:
        names = s.scalars(select(Workload.name).where(Workload.project_id == project.id)).all()
        assert names == ["train", "train"]


def test_deleting_a_workload_deletes_its_pods_and_events(sessions: sessionmaker[Session]) -> None:
    with sessions() as s, s.begin():
        project = Project(name="p")
        keep, gone = _workload(project, "keep"), _workload(project, "gone")
        for w in (keep, gone):
            w.pods = [Pod(name=f"{w.name}-master-0", role="master", index=0, ranks=[0, 1])]
            w.events = [Event(type="Submitted", time=T0)]
        s.add_all([keep, gone])
    with sessions() as s, s.begin():  # by the database's ON DELETE CASCADE, not the ORM
        s.execute(delete(Workload).where(Workload.id == gone.id))
    with sessions() as s:
        assert s.scalars(select(Pod.workload_id)).all() == [keep.id]
        assert s.scalars(select(Event.workload_id)).all() == [keep.id]
        assert s.get(Pod, keep.pods[0].id).ranks == [0, 1]
    with sessions() as s, s.begin():  # and the ORM way
        s.delete(s.get(Workload, keep.id))
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(Pod)) == 0
        assert s.scalar(select(func.count()).select_from(Event)) == 0


def test_a_project_with_workloads_cannot_be_deleted(sessions: sessionmaker[Session]) -> None:
    with sessions() as s, s.begin():
        project = Project(name="p", resources=[{"nodePool": {"name": "default"}, "gpu": {}}])
        s.add(_workload(project))
    with sessions() as s, pytest.raises(IntegrityError):
        s.execute(delete(Project).where(Project.id == project.id))
        s.commit()
    with sessions() as s:
        assert s.get(Project, project.id).resources[0]["nodePool"]["name"] == "default"


def test_deleting_a_user_removes_credentials_and_membership_keeps_workloads(
    sessions: sessionmaker[Session],
) -> None:
    with sessions() as s, s.begin():
        user, project = User(name="ada"), Project(name="p")
        s.add_all([user, project])
        s.flush()
        s.add_all(
            [
                ProjectMember(project_id=project.id, user_id=user.id),
                AccessKey(user_id=user.id, client_id="cid", secret_hash="h"),
                Token(user_id=user.id, token_hash="th", expires_at=T0),
                _workload(project, created_by=user.id),
            ]
        )
    with sessions() as s, s.begin():
        s.execute(delete(User).where(User.id == user.id))
    with sessions() as s:
        for model in (ProjectMember, AccessKey, Token):
            assert s.scalar(select(func.count()).select_from(model)) == 0
        assert s.scalars(select(Workload.created_by)).all() == [None]


def test_new_rows_have_ids_and_defaults_before_they_are_flushed() -> None:
    w = _workload(Project(name="p"))
    assert len(w.id) == 12 and w.phase == "Creating" and w.attempt == 0
    assert w.desired_phase == "Running" and w.backend == "local" and w.phase_reason == ""
    assert w.created_at.tzinfo is timezone.utc
    pod = Pod(name="x", role="worker", index=1)
    assert (pod.phase, pod.node, pod.ranks, pod.attempt) == ("Pending", "", [], 0)
    assert Workload(name="a").id != Workload(name="a").id
    with pytest.raises(TypeError, match="nope"):
        Workload(nope=1)


# ----- time ------------------------------------------------------------------------------


def test_datetimes_round_trip_as_aware_utc(sessions: sessionmaker[Session]) -> None:
    india = timezone(timedelta(hours=5, minutes=30))
    local = datetime(2026, 3, 1, 17, 30, 0, 123456, tzinfo=india)  # 12:00:00.123456 UTC
    with sessions() as s, s.begin():
        w = _workload(Project(name="p"), started_at=local)
        s.add(w)
    with sessions() as s:
        got = s.get(Workload, w.id)
        assert got.started_at == local
        assert got.started_at.tzinfo is timezone.utc
        assert got.started_at == T0 + timedelta(microseconds=123456)
        assert got.created_at.tzinfo is timezone.utc and got.completed_at is None
        # Comparisons in SQL work with aware parameters in any zone.
        hits = s.scalars(
            select(Workload.id).where(Workload.started_at > local - timedelta(seconds=1))
        )
        assert hits.all() == [w.id]
        assert s.scalars(select(Workload.id).where(Workload.started_at > local)).all() == []


def test_naive_datetimes_are_refused(sessions: sessionmaker[Session]) -> None:
    with sessions() as s, pytest.raises(StatementError, match="naive datetime"):
        s.add(_workload(Project(name="p"), started_at=datetime(2026, 3, 1, 12, 0)))
        s.commit()


def test_utcnow_is_aware_utc() -> None:
    now = db.utcnow()
    assert now.tzinfo is timezone.utc
    assert abs(now - datetime.now(timezone.utc)) < timedelta(seconds=5)


def test_sessions_keep_objects_readable_after_commit(sessions: sessionmaker[Session]) -> None:
    with sessions() as s:
        project = Project(name="p")
        s.add(project)
        s.commit()
    assert project.name == "p" and project.created_at.tzinfo is timezone.utc

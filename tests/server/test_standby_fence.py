"""The lease and its fence on a real PostgreSQL, in-process: election, renewal, and a
write of an old active refused by the database itself (not by its own clock)."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from ringleader.server import db
from ringleader.server.ha import fence, lease
from ringleader.server.ha.elector import ACTIVE, STANDBY, Elector
from ringleader.server.models import Project
from tests.conftest import wait_until
from tests.fixtures.postgres import pg_app_url, postgres_server  # noqa: F401


def _store(url: str, holder: str, ttl_s: float = 30.0) -> lease.LeaseStore:
    return lease.LeaseStore(url, holder, f"http://{holder}.example:8470", ttl_s)


@pytest.fixture
def stores(pg_app_url: str) -> Iterator[tuple[lease.LeaseStore, lease.LeaseStore]]:  # noqa: F811
    a, b = _store(pg_app_url, "a"), _store(pg_app_url, "b")
    yield a, b
    a.dispose()
    b.dispose()


def _fenced_sessions(url: str, holder: str, current: fence.Fence) -> sessionmaker[Session]:
    database = db.open_database(url, lease.connect_args(holder))
    for engine in database.engines:
        fence.install(engine, current)
    return database.writer


def _projects(url: str) -> set[str]:
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            return set(conn.scalars(select(Project.name)))
    finally:
        engine.dispose()


def test_one_holder_at_a_time_and_a_takeover_bumps_the_epoch(stores) -> None:  # type: ignore[no-untyped-def]
    a, b = stores
    first = a.acquire()
    assert first is not None
    assert b.acquire() is None  # held and live: the standby waits
    assert a.renew(first)
    seen = b.current()
    assert (
        seen is not None and seen.holder == "a" and seen.live and seen.url.startswith("http://a.")
    )
    a.release(first)
    second = b.acquire()
    assert second == first + 1
    assert not a.renew(first)  # the old holder's renewal finds the row moved
    assert a.acquire() is None


def test_the_same_home_takes_its_own_lease_back_at_once(stores) -> None:  # type: ignore[no-untyped-def]
    a, _b = stores
    first = a.acquire()
    assert first is not None
    again = a.acquire()  # a restarted process of the same home: no wait for the expiry
    assert again == first + 1


def test_a_replaced_active_cannot_commit_a_write(pg_app_url: str, stores) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """A's lease expires (A never noticed: its own clock says it still holds it) and B
    takes it; A's next write reaches the database and is refused there."""
    short = _store(pg_app_url, "a", ttl_s=0.5)
    try:
        epoch = short.acquire()
        assert epoch is not None
        believes = fence.Fence()
        believes.grant(epoch, math.inf)  # a paused or partitioned process's belief
        writer = _fenced_sessions(pg_app_url, "a", believes)
        with writer() as s, s.begin():  # while it holds the lease, A writes
            s.add(Project(name="before", resources=[]))
        wait_until(lambda: not short.current().live, timeout=30)  # type: ignore[union-attr]
        _a, b = stores
        assert b.acquire() == epoch + 1
        refused = pytest.raises(fence.NotActive, match="taken by another server")
        with refused, writer() as s, s.begin():
            s.add(Project(name="after", resources=[]))
        assert believes.epoch() is None  # and A knows it now
        assert _projects(pg_app_url) >= {"before"}
        assert "after" not in _projects(pg_app_url)
    finally:
        short.dispose()


def test_a_write_in_flight_is_committed_before_the_takeover(pg_app_url: str) -> None:  # noqa: F811
    """The fence's row lock holds a take-over until the writer commits: a write that
    passed the check is stored, and it precedes the new epoch."""
    a = _store(pg_app_url, "a")
    b = _store(pg_app_url, "b")
    try:
        epoch = a.acquire()
        assert epoch is not None
        holds = fence.Fence()
        holds.grant(epoch, math.inf)
        writer = _fenced_sessions(pg_app_url, "a", holds)
        session = writer()
        session.begin()
        session.add(Project(name="in-flight", resources=[]))
        session.flush()
        conn = session.connection()
        holds.check(conn.connection.dbapi_connection)  # the lock, as the commit takes it
        a.release(epoch)  # the lease is free: B may take it, but must wait for the lock
        took: list[int | None] = []
        taker = threading.Thread(target=lambda: took.append(_take_waiting(b)))
        taker.start()
        wait_until(lambda: _waiting_for_lock(pg_app_url), timeout=30)
        session.commit()  # checks again (our own lock: no wait) and commits
        session.close()
        taker.join(timeout=30)
        assert took == [epoch + 1]
        assert "in-flight" in _projects(pg_app_url)
    finally:
        a.dispose()
        b.dispose()


def _take_waiting(store: lease.LeaseStore) -> int | None:
    """Acquire with a lock wait long enough for the test (the store's own is 1 s)."""
    with store.engine.connect() as conn:
        conn.execute(text("SET lock_timeout = '30s'"))
        conn.commit()
        row = conn.execute(text("SELECT 1 FROM server_lease WHERE id = 1 FOR UPDATE")).first()
        assert row is not None
        conn.rollback()
    return store.acquire()


def _waiting_for_lock(url: str) -> bool:
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            waiting = conn.scalar(
                select(func.count())
                .select_from(text("pg_stat_activity"))
                .where(text("wait_event_type = 'Lock' AND datname = current_database()"))
            )
        return bool(waiting)
    finally:
        engine.dispose()


def test_an_elector_steps_down_when_it_cannot_renew(pg_app_url: str) -> None:  # noqa: F811
    """Renewals that fail (here: the row taken from under it) end the active's acting:
    its fence lapses, its loops are told to stop, and it becomes a standby."""
    events: list[str] = []
    store = _store(pg_app_url, "a", ttl_s=1.0)
    current = fence.Fence()
    elector = Elector(
        store,
        current,
        renew_s=0.2,
        ttl_s=1.0,
        on_active=lambda epoch: events.append(f"active {epoch}"),
        on_standby=lambda why: events.append(f"standby: {why}"),
    )
    other = _store(pg_app_url, "b")
    try:
        elector.step()
        assert elector.role == ACTIVE and current.epoch() is not None
        elector.start()
        with other.engine.begin() as conn:  # another server takes the row by force
            conn.execute(text("UPDATE server_lease SET epoch = epoch + 1, holder = 'b'"))
        # The role turns first (writes are refused at once), then the loops are told:
        # wait for the telling, not the role, or the event may still be on its way.
        wait_until(lambda: len(events) >= 2, timeout=30)
        assert elector.role == STANDBY and current.epoch() is None
        assert events[0].startswith("active ") and events[1].startswith("standby: another")
    finally:
        elector.stop()
        other.dispose()

"""The lease row's SQL: take it, renew it, hand it back, read who holds it.

Runs on an engine of its own (one connection, short timeouts): a renewal never
queues behind request traffic, and a database that stops answering makes a
renewal fail within seconds instead of hanging for TCP's minutes.
All times are the database's (``clock_timestamp()``): servers' clocks are never
compared with each other.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import Engine, create_engine, text

log = logging.getLogger(__name__)

LEASE_ROW = 1  # the one row of ``server_lease`` (``models.ServerLease``)

# libpq: give up connecting after this; unacknowledged data for this long breaks
# the connection (a partition); statements and lock waits end after these.
CONNECT_TIMEOUT_S = 2
TCP_USER_TIMEOUT_MS = 2000
STATEMENT_TIMEOUT_MS = 2000
LOCK_TIMEOUT_MS = 1000


def application_name(holder: str) -> str:
    """How a server's database sessions are named (a take-over ends the old holder's)."""
    return f"ringleader-{holder}"[:63]


def connect_args(holder: str) -> dict[str, object]:
    """libpq settings for every connection of a server in a lease: named, and quick to
    notice a network that went away (a partition must not hang a request or a renewal)."""
    return {
        "application_name": application_name(holder),
        "connect_timeout": CONNECT_TIMEOUT_S,
        "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 1,
        "keepalives_count": 3,
    }


@dataclass(frozen=True)
class Holder:
    """Who holds the lease now, as the database says."""

    epoch: int
    holder: str
    url: str
    live: bool  # not expired


class LeaseStore:
    """The lease row for server ``holder`` (advertised at ``url``)."""

    def __init__(self, url: str, holder: str, advertised: str, ttl_s: float) -> None:
        self.holder = holder
        self.advertised = advertised
        self.ttl_s = ttl_s
        args = connect_args(holder)
        args["options"] = (
            f"-c statement_timeout={STATEMENT_TIMEOUT_MS} -c lock_timeout={LOCK_TIMEOUT_MS}"
        )
        self.engine: Engine = create_engine(
            url, pool_size=1, max_overflow=0, pool_pre_ping=True, connect_args=args
        )

    def dispose(self) -> None:
        self.engine.dispose()

    def current(self) -> Holder | None:
        """The row as it is (None: no server ever held it)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT epoch, holder, url, expires_at > clock_timestamp() "
                    "FROM server_lease WHERE id = :id"
                ),
                {"id": LEASE_ROW},
            ).first()
        return Holder(int(row[0]), row[1], row[2], bool(row[3])) if row else None

    def acquire(self) -> int | None:
        """Take the lease if it is free (expired, never held, or ours from an earlier
        process of this home): the new epoch; None while another holds it."""
        seen = self.current()
        if seen is not None and seen.live and seen.holder != self.holder:
            return None
        if seen is not None and not seen.live and seen.holder not in ("", self.holder):
            self._end_sessions_of(seen.holder)  # a partitioned one may hold a row lock
        with self.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO server_lease (id, epoch, holder, url, expires_at) "
                    "VALUES (:id, 0, '', '', to_timestamp(0)) ON CONFLICT (id) DO NOTHING"
                ),
                {"id": LEASE_ROW},
            )
            row = conn.execute(
                text(
                    "SELECT holder, expires_at > clock_timestamp() FROM server_lease "
                    "WHERE id = :id FOR UPDATE"
                ),
                {"id": LEASE_ROW},
            ).one()
            if row[1] and row[0] != self.holder:
                return None  # taken meanwhile
            epoch = conn.execute(
                text(
                    "UPDATE server_lease SET epoch = epoch + 1, holder = :me, url = :url, "
                    "expires_at = clock_timestamp() + make_interval(secs => :ttl) "
                    "WHERE id = :id RETURNING epoch"
                ),
                {"id": LEASE_ROW, "me": self.holder, "url": self.advertised, "ttl": self.ttl_s},
            ).scalar_one()
        return int(epoch)

    def renew(self, epoch: int) -> bool:
        """Push the expiry on by ``ttl_s``; False when the lease is no longer ours."""
        with self.engine.begin() as conn:
            result = conn.execute(
                text(
                    "UPDATE server_lease SET "
                    "expires_at = clock_timestamp() + make_interval(secs => :ttl) "
                    "WHERE id = :id AND epoch = :epoch AND holder = :me"
                ),
                {"id": LEASE_ROW, "epoch": epoch, "me": self.holder, "ttl": self.ttl_s},
            )
        return result.rowcount == 1

    def release(self, epoch: int) -> None:
        """Hand the lease back now (a clean shutdown): a standby takes it at its next try."""
        with self.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE server_lease SET expires_at = to_timestamp(0) "
                    "WHERE id = :id AND epoch = :epoch AND holder = :me"
                ),
                {"id": LEASE_ROW, "epoch": epoch, "me": self.holder},
            )

    def _end_sessions_of(self, holder: str) -> None:
        """End the database sessions of a holder whose lease expired (see the package
        docstring): a session cut off mid-commit must not keep its row lock."""
        with self.engine.connect() as conn:
            ended = conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = :app AND pid <> pg_backend_pid() "
                    "AND datname = current_database()"
                ),
                {"app": application_name(holder)},
            ).scalar_one()
            conn.commit()
        if ended:
            log.warning("ended %d database session(s) of %s, whose lease expired", ended, holder)

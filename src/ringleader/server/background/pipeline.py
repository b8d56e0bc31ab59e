"""What every pipeline shares: the world it acts on, its thread, one write helper.

Each pass is load -> process -> apply: read what needs action in one short
transaction, hand backend I/O to the pipeline's workers with no transaction
open, and write each outcome in another (re-reading the row, since a user
or another pipeline may have acted in between).  Every phase change goes
through ``phases``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from ringleader.sched.model import Strategy
from ringleader.server.backends import BackendSet
from ringleader.server.background.calls import BackendCalls, Busy
from ringleader.server.db import Database
from ringleader.server.models import Workload

if TYPE_CHECKING:
    from ringleader.server.accounts import Accounts

log = logging.getLogger("ringleader.server.background")
MIN_PASS_GAP_S = 0.05  # a burst of wake-ups makes one pass, at most this often
PACE = 3.0  # a pipeline woken constantly uses at most about 1 / (1 + PACE) of a core


@dataclass
class World:
    """What the pipelines act on and with."""

    database: Database
    backends: BackendSet
    runs_dir: Path
    strategy: Strategy = "binpack"
    # Where pods reach this server, and how long their token lives (issue_pod_token);
    # no URL: pods get no token (tests that run the pipelines without a server).
    server_url: str = ""
    pod_token_ttl_s: int = 24 * 3600
    # Who workloads run as (server/accounts.py); None: as the server (--run-as server).
    accounts: Accounts | None = None
    busy: Busy = field(default_factory=Busy)
    # One background write at a time: the API's writes queue for the same one
    # connection (SQLite), and a dozen workers queued before them made every POST
    # wait behind all of them.  Backend calls run outside it, so none waits on I/O.
    write_turn: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._writer = self.database.writer
        self.readers = self.database.reader

    @contextmanager
    def sessions(self) -> Iterator[Session]:
        """A writer session, taken in turn with the other background writers."""
        with self.write_turn, self._writer() as session:
            yield session


def act(world: World, workload_id: str, change: Callable[[Session, Workload], object]) -> None:
    """Apply ``change`` to the current row of ``workload_id`` in one short write.

    The row is read ``FOR UPDATE`` (PostgreSQL; SQLite's one writer serializes whole
    transactions): a change decided on a phase read before a user's delete committed
    would otherwise overwrite it (a poll's Running over Deleting, a lost update that
    left a deleted workload running for good)."""
    with world.sessions() as s, s.begin():
        workload = s.get(Workload, workload_id, with_for_update=True)
        if workload is not None:
            change(s, workload)


class Pipeline:
    """One thread doing ``run_once`` when woken, or every ``interval_s``."""

    name = "pipeline"
    workers = 8

    def __init__(
        self,
        world: World,
        *,
        interval_s: float = 0.25,
        inline: bool = False,
        wake_all: Callable[[], None] | None = None,
    ) -> None:
        self.world = world
        self.interval_s = interval_s
        self.wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # A finished call may let this or another pipeline act: wake them all.
        self.calls = BackendCalls(
            self.name,
            world.busy,
            workers=self.workers,
            inline=inline,
            done=wake_all or self.wake.set,
        )

    def run_once(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"ringleader-{self.name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake.set()
        if self._thread:
            self._thread.join(timeout=10)
        self.calls.shutdown()

    def _run(self) -> None:
        calls_cpu = self.calls.cpu_spent()
        while not self._stop.is_set():
            started, cpu = time.monotonic(), time.thread_time()
            try:
                self.run_once()
                self.calls.report_slow()
            except Exception:  # keep going: one bad pass must not stop the server
                log.exception("%s pass failed", self.name)
            # Gather a burst of wake-ups into one pass at most every MIN_PASS_GAP_S, and
            # leave at least PACE times the CPU time spent before the next: a pass reads
            # every workload it acts on, and a burst of submissions wakes it constantly;
            # without this the pipelines took the cores from the API. What is spent is
            # the pass's own and its calls' (the polls of every workload it handed to
            # its workers since the last pass: unpaced, they were most of it).
            done = self.calls.cpu_spent()
            gap = pass_gap(time.thread_time() - cpu, done - calls_cpu)
            calls_cpu = done
            self.wake.wait(self.interval_s)
            self._stop.wait(max(0.0, gap - (time.monotonic() - started)))
            self.wake.clear()


def pass_gap(pass_cpu_s: float, calls_cpu_s: float) -> float:
    """Seconds from one pass's start to the next's, at least: MIN_PASS_GAP_S, or PACE
    times the CPU the pass and its calls used, so a pipeline kept busy uses about
    1 / (1 + PACE) of a core however much it hands to its workers."""
    return max(MIN_PASS_GAP_S, PACE * (pass_cpu_s + calls_cpu_s))

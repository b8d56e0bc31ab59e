"""Backend calls off the pipelines' threads: bounded in concurrency, watched in time.

A pipeline never waits on a backend: it hands each call to its own small
pool of workers and goes on.  One set of *busy* workloads is shared by all
pipelines, so a workload has at most one backend call in flight (a slow
stop is never joined by a poll or a second stop of the same workload), and
a pipeline skips a busy workload until its call returns.

Time: a call runs as long as the backend's own bounds let it (a local stop
waits at most its grace plus slack, then SIGKILLs); one past ``slow_after_s``
is logged once, naming the backend call and the workload.  Nothing else
waits on it: other workloads' placements, polls and stops go on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("ringleader.server.background")


class Busy:
    """Workload ids with a backend call in flight, across all pipelines."""

    def __init__(self) -> None:
        self._ids: dict[str, tuple[str, float]] = {}  # id -> (what, since)
        self._lock = threading.Lock()

    def claim(self, workload_id: str, what: str) -> bool:
        with self._lock:
            if workload_id in self._ids:
                return False
            self._ids[workload_id] = (what, time.monotonic())
            return True

    def release(self, workload_id: str) -> None:
        with self._lock:
            self._ids.pop(workload_id, None)

    def __contains__(self, workload_id: object) -> bool:
        with self._lock:
            return workload_id in self._ids

    def older_than(self, seconds: float) -> list[tuple[str, str, float]]:
        now = time.monotonic()
        with self._lock:
            return [(i, what, now - t) for i, (what, t) in self._ids.items() if now - t > seconds]


class BackendCalls:
    """One pipeline's workers.  ``inline``: run each call at once in the caller's
    thread and let its exception through (unit tests step the pipelines by hand)."""

    def __init__(
        self,
        name: str,
        busy: Busy,
        *,
        workers: int = 8,
        inline: bool = False,
        done: Callable[[], None] = lambda: None,
        slow_after_s: float = 30.0,
    ) -> None:
        self.name = name
        self.busy = busy
        self.inline = inline
        self.done = done
        self.slow_after_s = slow_after_s
        self._pool = (
            None
            if inline
            else ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"ringleader-{name}")
        )
        self._slow_logged: set[str] = set()
        self._cpu_s = 0.0  # the calls' CPU time, summed (``cpu_spent``)
        self._cpu_lock = threading.Lock()

    def cpu_spent(self) -> float:
        """CPU seconds the calls run on the workers have used so far, in total: the
        pipeline paces its passes on it too (``pipeline.PACE``), since its polls, starts
        and stops run here, not on its own thread."""
        with self._cpu_lock:
            return self._cpu_s

    def run(self, workload_id: str, what: str, call: Callable[[], object]) -> bool:
        """Run ``call`` for ``workload_id`` unless a call for it is in flight (False).

        ``call`` returns False when it changed nothing; anything else wakes the
        pipelines, since what it wrote may let one of them act."""
        if not self.busy.claim(workload_id, f"{self.name}: {what}"):
            return False
        if self._pool is None:
            try:
                call()
            finally:
                self.busy.release(workload_id)
            return True
        self._pool.submit(self._guarded, workload_id, what, call)
        return True

    def _guarded(self, workload_id: str, what: str, call: Callable[[], object]) -> None:
        changed: object = True
        cpu = time.thread_time()
        try:
            changed = call()
        except Exception:  # one workload's failure never stops the others'
            log.exception("%s: %s of workload %s failed", self.name, what, workload_id)
        finally:
            self.busy.release(workload_id)
            self._slow_logged.discard(workload_id)
            with self._cpu_lock:
                self._cpu_s += time.thread_time() - cpu
        # A call that wrote nothing (most polls) wakes nobody: waking every pipeline
        # after every poll kept them all busy (and the cores) with nothing to do.
        if changed is not False:
            self.done()

    def report_slow(self) -> None:
        """Log, once each, the calls in flight for longer than ``slow_after_s``."""
        for workload_id, what, age in self.busy.older_than(self.slow_after_s):
            if what.startswith(f"{self.name}:") and workload_id not in self._slow_logged:
                self._slow_logged.add(workload_id)
                log.warning("%s for workload %s still running after %.0f s", what, workload_id, age)

    def shutdown(self) -> None:
        """Stop taking calls; calls in flight finish on their own (daemon workers
        would be cut off mid-write, so the pool's threads are not abandoned)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

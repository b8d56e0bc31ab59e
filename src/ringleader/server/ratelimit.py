"""Load bounds for ``POST /api/v1/token``: rate limits and a small pool for key checks.

Why: checking a client secret is PBKDF2 (~0.1 s of CPU, on purpose). Without
bounds, a few threads of wrong secrets occupy every worker thread and every
core, and every other route waits behind them.

Nomenclature:
- *bucket*: a token bucket per key (a client id, a source address): holds up
  to ``capacity`` requests and refills ``per_s`` a second; an empty bucket
  answers 429 with the seconds until it holds one again (``Retry-After``);
- *hold*: a refused request is answered only after its ``Retry-After`` (at
  most ``MAX_HOLD_S``), on the event loop, costing no CPU: a client that
  floods without waiting then sends one request a second per connection
  instead of a thousand, so refusing it no longer takes the cores other
  routes need (at most ``max_held`` are held; beyond that, refused at once);
- *key checks*: the few threads (1 to 4, a quarter of the cores) that run
  PBKDF2; requests wait for one on the event loop, holding no worker thread,
  and beyond ``queue`` waiting ones they are refused (429) instead of piling up.

Invariants:
- memory is bounded: at most ``max_keys`` buckets per kind (the least
  recently used goes first; a forgotten key starts full, which only
  forgives); request fields are bounded by the schema (``TokenRequest``);
- no clock is read but the injected one (``time.monotonic`` by default).
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from ringleader.errors import TooManyRequests

P = ParamSpec("P")
T = TypeVar("T")


class RateLimited(TooManyRequests):
    """A 429 that says when to retry (the server sends it as ``Retry-After``)."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        self.retry_after_s = max(1, math.ceil(retry_after_s))
        super().__init__(f"{message}; retry in {self.retry_after_s} s")


class Buckets:
    """Token buckets by key, at most ``max_keys`` of them (LRU)."""

    def __init__(
        self,
        capacity: float,
        per_s: float,
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity, self.per_s, self.max_keys, self.clock = capacity, per_s, max_keys, clock
        self._levels: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (level, at)
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Take one request from ``key``'s bucket: 0 when allowed, else the seconds to wait."""
        with self._lock:
            now = self.clock()
            level, at = self._levels.pop(key, (self.capacity, now))
            level = min(self.capacity, level + (now - at) * self.per_s)
            wait = 0.0 if level >= 1 else (1 - level) / self.per_s
            self._levels[key] = (level - 1 if wait == 0 else level, now)
            while len(self._levels) > self.max_keys:
                self._levels.popitem(last=False)
            return wait

    def peek(self, key: str) -> float:
        """Like ``take`` without taking: 0 when ``key`` has a request left."""
        with self._lock:
            now = self.clock()
            level, at = self._levels.get(key, (self.capacity, now))
            level = min(self.capacity, level + (now - at) * self.per_s)
            return 0.0 if level >= 1 else (1 - level) / self.per_s

    def __len__(self) -> int:
        return len(self._levels)


MAX_HOLD_S = 2.0


class TokenLimits:
    """The token endpoint's limits: per source address and per client id."""

    def __init__(
        self,
        per_address: Buckets | None = None,
        per_client: Buckets | None = None,
        *,
        max_held: int = 512,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        # Generous for people and scripts (a CLI command asks for one token), tight
        # for a flood: a key check takes ~0.1 s of a key-check thread.
        self.per_address = Buckets(60, 5) if per_address is None else per_address
        self.per_client = Buckets(20, 2) if per_client is None else per_client
        # Wrong secrets (what guessing is made of, and what costs PBKDF2) have buckets
        # of their own, far smaller: a person mistyping gets a few tries, then one a
        # few seconds; a script with the right secret never touches them.
        self.failed_address = Buckets(10, 0.5, clock=self.per_address.clock)
        self.failed_client = Buckets(5, 0.2, clock=self.per_client.clock)
        self.max_held, self.sleep = max_held, sleep
        self.held = 0  # changed on the event loop only

    async def hold(self, refused: RateLimited) -> None:
        """Wait out ``refused``'s Retry-After (at most MAX_HOLD_S) before it is answered,
        unless ``max_held`` refusals wait already (then it is answered at once)."""
        if self.held >= self.max_held:
            return
        self.held += 1
        try:
            await self.sleep(min(float(refused.retry_after_s), MAX_HOLD_S))
        finally:
            self.held -= 1

    def check(self, client_id: str, address: str) -> None:
        """Raise RateLimited when this address or this client id asked too often."""
        wait = self.per_address.take(address)
        if wait:
            raise RateLimited(f"too many token requests from {address}", wait)
        wait = self.per_client.take(client_id)
        if wait:
            raise RateLimited("too many token requests for this clientID", wait)
        wait = self.failed_address.peek(address)
        if wait:
            raise RateLimited(f"too many wrong credentials from {address}", wait)
        wait = self.failed_client.peek(client_id)
        if wait:
            raise RateLimited("too many wrong secrets for this clientID", wait)

    def failed(self, client_id: str, address: str) -> None:
        """Count a wrong secret (or unknown id) against its address and client id."""
        self.failed_address.take(address)
        self.failed_client.take(client_id)


KEY_CHECK_NICE = 10


def lower_priority() -> None:
    """Run the calling thread at a lower CPU priority (Linux: a thread's own nice).

    Key checks are what a stranger can make the server do; on a busy machine
    they yield the cores to the routes members use, and only wait longer.
    Elsewhere (no per-thread nice) nothing changes.
    """
    if sys.platform != "linux" or not hasattr(os, "setpriority"):
        return
    try:
        current = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), current + KEY_CHECK_NICE)
    except OSError:
        pass


class KeyChecks:
    """Runs slow credential checks on ``workers`` threads of their own, with at
    most ``queue`` requests waiting; the caller waits on the event loop."""

    def __init__(
        self,
        workers: int | None = None,
        queue: int = 32,
        warm: Callable[[], object] | None = None,
    ) -> None:
        # PBKDF2 releases the GIL and takes a core per thread: a quarter of the
        # cores at most (1 to 4 threads), so a flood never takes the machine.
        workers = workers or max(1, min(4, (os.cpu_count() or 2) // 4))
        self.workers, self.queue = workers, queue
        self.executor = ThreadPoolExecutor(
            workers, thread_name_prefix="key-check", initializer=lower_priority
        )
        self.pending = 0  # running + waiting; changed on the event loop only
        if warm is not None:  # e.g. the dummy hash, so no request pays for making it
            self.executor.submit(warm)

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if self.pending >= self.workers + self.queue:
            raise RateLimited("the server is busy checking credentials", 1)
        self.pending += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))
        finally:
            self.pending -= 1

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)

"""The election loop: a standby tries to take the lease, the active renews it.

Two threads: the *elector* talks to the database every ``renew_s``; the
*watchdog* steps the server down the moment its fence lapses, even while the
elector is stuck in a renewal the network will never answer. Becoming active
and stepping down are serialised (one lock) and call the server's
``on_active(epoch)`` / ``on_standby(why)``: start or stop its loops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ringleader.server.ha.fence import Fence
from ringleader.server.ha.lease import LeaseStore

log = logging.getLogger(__name__)

ACTIVE, STANDBY = "active", "standby"
WATCH_S = 0.1  # how often the watchdog looks at the fence


class Elector:
    """One server's part in the election (see the module docstring)."""

    def __init__(
        self,
        store: LeaseStore,
        fence: Fence,
        *,
        renew_s: float,
        ttl_s: float,
        on_active: Callable[[int], None],
        on_standby: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.fence = fence
        self.renew_s = renew_s
        self.ttl_s = ttl_s
        # Drift allowance: the fence lapses this much before the row can expire.
        self.margin_s = max(0.2, ttl_s / 10)
        self.on_active = on_active
        self.on_standby = on_standby
        self.clock = clock
        self.role = STANDBY
        self.epoch: int | None = None
        self.active_url: str | None = None  # the holder's, as last read (for standby answers)
        self._transition = threading.RLock()  # on_active may step down
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        fence.active_url = lambda: self.active_url

    # ----- life ------------------------------------------------------------------------
    def start(self) -> None:
        for target, name in (
            (self._elect, "ringleader-elector"),
            (self._watch, "ringleader-lease-watch"),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop electing; an active steps down and hands the lease back at once."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        epoch = self.epoch
        self.step_down("the server is stopping")
        if epoch is not None:
            try:
                self.store.release(epoch)
            except Exception:  # the database is gone: the lease expires by itself
                log.warning("could not hand the lease back; it expires in %gs", self.ttl_s)
        self.store.dispose()

    # ----- the loops -------------------------------------------------------------------
    def _elect(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception as exc:  # the database is unreachable: the watchdog decides
                log.warning("lease: %s", str(exc).splitlines()[0] if str(exc) else exc)
            self._stop.wait(self.renew_s)

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_S):
            if self.role == ACTIVE and self.fence.lapsed():
                self.step_down(f"the lease was not renewed within {self.ttl_s:g}s")

    def settle(self, timeout_s: float) -> None:
        """At start-up: elect until this server is active or another one visibly holds
        the lease (a lone server answers as the active one from its first request,
        even when a loaded machine made its first try too slow to count)."""
        deadline = self.clock() + timeout_s
        while self.clock() < deadline:
            try:
                self.step()
                if self.role == ACTIVE and self.fence.epoch() is not None:
                    return
                seen = self.store.current()
                if seen is not None and seen.live and seen.holder != self.store.holder:
                    return  # a standby: the active is there
            except Exception as exc:  # not reachable yet: the election goes on in its thread
                log.warning("lease: %s", str(exc).splitlines()[0] if str(exc) else exc)
            self._stop.wait(min(self.renew_s, 0.5))

    def step(self) -> None:
        """One election round: renew (active) or try to take the lease (standby)."""
        sent = self.clock()
        if self.role == ACTIVE and self.epoch is not None:
            epoch = self.epoch
            if self.store.renew(epoch):
                self.fence.extend(epoch, sent + self.ttl_s - self.margin_s)
            else:
                self.step_down(f"another server took the lease (ours was epoch {epoch})")
            return
        epoch = self.store.acquire()
        if epoch is None:
            seen = self.store.current()
            self.active_url = seen.url if seen is not None and seen.live else None
            return
        self._become_active(epoch, sent + self.ttl_s - self.margin_s)

    def _become_active(self, epoch: int, until: float) -> None:
        with self._transition:
            self.fence.grant(epoch, until)
            self.epoch, self.role, self.active_url = epoch, ACTIVE, self.store.advertised
            log.warning("this server is now the active one (lease epoch %d)", epoch)
            try:
                self.on_active(epoch)
            except Exception:
                log.exception("becoming active failed")
                self.step_down("its start-up as the active server failed")

    def step_down(self, why: str) -> None:
        """Stop acting: writes refused at once, then the loops stopped."""
        with self._transition:
            if self.role != ACTIVE:
                return
            self.fence.revoke()
            self.role, self.epoch, self.active_url = STANDBY, None, None
            log.warning("this server is a standby now: %s", why)
            self.on_standby(why)

"""Which of several servers a client talks to: the active one (``server/ha``).

``RINGLEADER_URL`` may list an active server and its standbys, comma-separated.
A standby answers a write with 503, ``Retry-After`` and ``X-Ringleader-Active``
(``server/ha/gate.py``): nothing was done there, so the call goes again to the
active it names, or to the next URL. With several URLs, a server that does not
answer is skipped; one whose answer was lost mid-way is asked again only when
that cannot do the thing twice (``retry_safe``: reads, and submissions with
their ``Idempotency-Key``). All of it for at most ``FAILOVER_BUDGET_S``: a
take-over takes about the lease's TTL (3 s by default).
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from ringleader.client_errors import unreachable_detail
from ringleader.errors import ServerUnreachable

# How long a call goes on trying, across the configured servers, while none is the active
# one (a standby's 503, or, with several URLs, one that does not answer): a take-over
# takes a few seconds (the lease's TTL), so this covers it with room to spare.
FAILOVER_BUDGET_S = 30.0
FAILOVER_PAUSE_S = 0.2
# What a standby's 503 carries (server/ha/gate.py): its role, and the active's URL.
ROLE_HEADER = "X-Ringleader-Role"
ACTIVE_HEADER = "X-Ringleader-Active"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def _standby_pause(response: httpx.Response) -> float:
    """A standby's Retry-After, at most a second (a take-over is near)."""
    try:
        return min(1.0, max(FAILOVER_PAUSE_S, float(response.headers.get("Retry-After", ""))))
    except ValueError:
        return 1.0


def split_urls(url: str) -> list[str]:
    """``RINGLEADER_URL``'s servers: one URL, or several separated by commas."""
    return [part.strip().rstrip("/") for part in url.split(",") if part.strip()] or [url]


class Failover:
    """The client's half of the election: ``_send`` one exchange with the active."""

    url: str
    urls: list[str]
    source: str | None
    http: httpx.Client

    def _send(self, method: str, path: str, *, retry_safe: bool, **kwargs: Any) -> httpx.Response:
        """One HTTP exchange with the active server among ``urls`` (``server/ha``).

        A standby's 503 (nothing was done) is sent again to the active it names, or
        to the next URL; with several URLs, a server that does not answer is
        skipped, and one whose answer was lost is asked again when ``retry_safe``.
        Both for at most ``FAILOVER_BUDGET_S``; then the last answer or failure is
        the caller's.
        """
        deadline = time.monotonic() + FAILOVER_BUDGET_S
        while True:
            try:
                response = self.http.request(method, path, **kwargs)
            except (httpx.TransportError, httpx.InvalidURL) as exc:
                unsent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                if len(self.urls) < 2 or not (unsent or retry_safe) or time.monotonic() > deadline:
                    raise ServerUnreachable(
                        self.url, unreachable_detail(exc), self.source
                    ) from None
                self._use(self._next_url())
                time.sleep(FAILOVER_PAUSE_S)
                continue
            if response.status_code != 503 or response.headers.get(ROLE_HEADER) != "standby":
                return response
            if time.monotonic() > deadline:
                return response
            active = response.headers.get(ACTIVE_HEADER)
            if active and active.rstrip("/") != self.url:
                self._use(active.rstrip("/"))  # no pause: it answers now
                continue
            self._use(self._next_url())
            time.sleep(_standby_pause(response))

    def _next_url(self) -> str:
        return self.urls[(self.urls.index(self.url) + 1) % len(self.urls)]

    def _use(self, url: str) -> None:
        """Talk to ``url`` from now on (kept among ``urls``: it may fail over again)."""
        if url not in self.urls:
            self.urls.append(url)
        self.url = url
        self.http.base_url = httpx.URL(url)

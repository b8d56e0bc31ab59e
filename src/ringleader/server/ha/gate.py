"""What a standby answers: reads as usual, writes refused with a 503 that says where.

Why 503 + ``Retry-After`` rather than a 307 to the active: a redirect to another
origin loses the ``Authorization`` header in httpx, browsers and ``requests``
alike (they drop it across hosts and ports), so a redirected write would come
back 401; and a standby that just lost sight of the active has nowhere to
redirect to. A 503 with ``Retry-After`` is what every HTTP client (Run:ai's
CLI, curl ``--retry``, the ringleader client) already treats as "try again
shortly"; ``X-Ringleader-Active`` names the active's URL when it is known, and
the ringleader client goes there (``client.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ringleader.server.ha.fence import NotActive

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
RETRY_AFTER_S = 1
ROLE_HEADER = "X-Ringleader-Role"
ACTIVE_HEADER = "X-Ringleader-Active"


def refusal(exc: NotActive) -> tuple[dict[str, Any], dict[str, str]]:
    """The body and headers of a standby's 503."""
    headers = {"Retry-After": str(RETRY_AFTER_S), ROLE_HEADER: "standby"}
    if exc.active_url:
        headers[ACTIVE_HEADER] = exc.active_url
    return {"code": 503, "message": str(exc)}, headers


class StandbyGate:
    """ASGI middleware: a write request reaching a server that is not active gets
    ``refusal`` before anything reads its body; ``active()`` says which we are."""

    def __init__(self, app: Any, active: Callable[[], bool], active_url: Callable[[], str | None]):
        self.app = app
        self.active = active
        self.active_url = active_url

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS or self.active():
            await self.app(scope, receive, send)
            return
        active = self.active_url()
        where = f"; the active server is {active}" if active else "; none is active right now"
        exc = NotActive(f"this server is a standby: it does not take writes{where}", active)
        body, headers = refusal(exc)
        raw = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(raw)).encode()),
                    *((k.lower().encode(), v.encode()) for k, v in headers.items()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": raw})

"""A bound on request bodies: past ``max_bytes`` the answer is 413, nothing else runs.

Nomenclature: the *body* is what an HTTP request streams after its headers
(ASGI ``http.request`` messages); its *declared* size is ``Content-Length``.

Invariants:
- the body is counted as it streams, so a request that declares nothing
  (chunked) or declares less than it sends is stopped at the bound too;
  a declared size over the bound is refused before a byte is read;
- the app never sees a body over the bound: the middleware reads the body
  first (at most ``max_bytes``, which the app would have read whole anyway)
  and hands it on in one message, then passes ``receive`` through, so a
  streaming response still hears the client go away;
- only HTTP is bounded here; WebSocket frames (exec) have their own limits.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024


class BodyLimit:
    """ASGI middleware: 413 for a request body over ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self.refuse(send, f"declares {declared} bytes")
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away before the end
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self.refuse(send, f"sent over {self.max_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        whole: Message | None = {
            "type": "http.request",
            "body": b"".join(chunks),
            "more_body": False,
        }

        async def replay() -> Message:
            nonlocal whole
            if whole is not None:
                message, whole = whole, None
                return message
            return await receive()

        await self.app(scope, replay, send)

    async def refuse(self, send: Send, what: str) -> None:
        text = (
            f"the request body {what}; this server takes at most {self.max_bytes} bytes "
            "(ringleader server --max-body-bytes)"
        )
        body = json.dumps({"code": 413, "message": text}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),  # the rest of the body is never read
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: MutableMapping[str, Any]) -> int | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server (h11) refuses it before the app runs
    return None

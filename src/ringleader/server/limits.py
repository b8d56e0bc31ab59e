"""A bound on request bodies: past ``max_bytes`` the answer is 413, nothing else runs.

Nomenclature: the *body* is what an HTTP request streams after its headers
(ASGI ``http.request`` messages); its *declared* size is ``Content-Length``.

Invariants:
- the body is counted as it streams, so a request that declares nothing
  (chunked) or declares less than it sends is stopped at the bound too;
  a declared size over the bound is refused before a byte is read;
- a body must arrive whole within ``timeout_s`` of its header, else 408;
- the app never sees a body over the bound: the middleware reads the body
  first (at most ``max_bytes``, which the app would have read whole anyway)
  and hands it on in one message, then passes ``receive`` through, so a
  streaming response still hears the client go away;
- the routes a stranger reaches without a token (``SMALL_BODY_PATHS``: the token
  exchange and the UI's login) take a few KiB at most: their bodies are a client
  id and a secret, so a stranger's megabytes are refused on their declared size,
  never read, parsed or validated;
- a request that carries no credential at all (no ``Authorization`` header, no UI
  session cookie) may send as little to any other route: every such route answers
  it 401 anyway, so its body is refused (401, on its declared or streamed size)
  rather than read up to ``max_bytes`` first;
- only HTTP is bounded here; WebSocket frames (exec) have their own limits;
- a JSON body's *shape* is bounded too (``JsonBounds``): at most ``MAX_JSON_KEYS``
  keys in one object, ``MAX_JSON_VALUES`` values in all and ``MAX_JSON_DEPTH``
  levels, checked in a worker thread before FastAPI parses and validates it, so
  the validation that follows (and its list of errors) is small whatever was sent:
  200k unknown keys are one 422 naming the object, not 200k errors built on the
  event loop; a body whose bytes alone show more keys than ``MAX_JSON_VALUES``
  (``counted_keys``) is refused before it is parsed at all;
- a JSON body of at most ``ON_LOOP_BODY_BYTES`` (a plain submission's) is parsed
  and walked on the event loop: tens of microseconds, less than a worker thread's
  round trip costs; its size is left in the scope (``BODY_BYTES``) so the route's
  own check knows it small (``validation.body_checked_off_loop``);
- a JSON body over ``IN_PROCESS_BODY_BYTES`` is counted, parsed and walked in the
  server's body checker, a process of its own (``CHECKER``): counting and parsing
  megabytes hold an interpreter's lock for tens to hundreds of milliseconds, and
  the event loop needs the server's; only a body found within the bounds (at most
  ``MAX_JSON_VALUES`` values: quick to parse) is parsed again here, on a thread.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio

from ringleader.server.services import reader_process

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
# Routes anyone can call without a token, and their bound (their bodies: an id and a secret).
SMALL_BODY_BYTES = 16 * 1024
SMALL_BODY_PATHS = frozenset({"/api/v1/token", "/login"})
# The whole body must arrive within this of its header (408 after): a client that
# trickles a body holds a connection no longer than one that sends half a header.
DEFAULT_BODY_TIMEOUT_S = 60.0
# The shape of a JSON body (``JsonBounds``): far above any spec's (256 variables of
# 3 keys, 64 pools), far below what makes validating or reporting errors costly.
MAX_JSON_KEYS = 1_000  # in one object
MAX_JSON_VALUES = 4_096  # in the whole body: every object's values and list's items
MAX_JSON_DEPTH = 32
# Bodies checked at once (each in a worker thread of its own): more wait their turn,
# so big bodies never take the threads every other request's handler runs on.
JSON_CHECKS = 2
# Bodies up to this are counted on the loop and parsed on a thread (a few ms at most);
# bigger ones are checked in the body checker process first (``body_problem``).
IN_PROCESS_BODY_BYTES = 64 * 1024
# Bodies up to this are parsed and walked on the loop (at most a few hundred values).
ON_LOOP_BODY_BYTES = 2048
CHECKER = reader_process.Reader()
# Where JsonBounds leaves the body it parsed, for the route's own check
# (``validation.validate_bodies_off_loop``), so a body is parsed once off the loop.
PARSED_BODY = "ringleader.parsed_body"
BODY_BYTES = "ringleader.body_bytes"  # the size of the body JsonBounds looked at


class BodyLimit:
    """ASGI middleware: 413 for a request body over ``max_bytes``."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int = DEFAULT_MAX_BODY_BYTES,
        timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
        session_cookie: str = "",
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.session_cookie = session_cookie.encode() + b"="

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        bound = SMALL_BODY_BYTES if scope.get("path") in SMALL_BODY_PATHS else self.max_bytes
        stranger = bound > SMALL_BODY_BYTES and not self._credentialed(scope)
        if stranger:
            bound = SMALL_BODY_BYTES
        declared = _content_length(scope)
        if declared is not None and declared > bound:
            await self.refuse(send, f"declares {declared} bytes", bound, stranger)
            return
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.timeout_s) as late:
            while True:
                message = await receive()
                if message["type"] != "http.request":  # the client went away before the end
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > bound:
                    await self.refuse(send, f"sent over {bound} bytes", bound, stranger)
                    return
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if late.cancelled_caught:  # a body that trickles holds its connection no longer
            text = (
                f"the request body did not arrive within {self.timeout_s:g} s "
                f"({size} bytes came) (ringleader server --body-timeout)"
            )
            await _answer(send, 408, text)
            return
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

    def _credentialed(self, scope: MutableMapping[str, Any]) -> bool:
        """Whether the request carries a credential (checked later, by the route)."""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                return True
            if name == b"cookie" and self.session_cookie != b"=" and self.session_cookie in value:
                return True
        return False

    async def refuse(self, send: Send, what: str, bound: int, stranger: bool = False) -> None:
        if stranger:
            text = (
                f"the request body {what} and carries no token; without one a request may "
                f"send at most {bound} bytes (get a token with `ringleader token` or "
                "POST /api/v1/token)"
            )
            await _answer(send, 401, text)
            return
        where = "(ringleader server --max-body-bytes)" if bound == self.max_bytes else "here"
        text = f"the request body {what}; this server takes at most {bound} bytes {where}"
        await _answer(send, 413, text)


async def _answer(send: Send, status: int, text: str) -> None:
    """A JSON error that closes the connection (the rest of the body is never read)."""
    body = json.dumps({"code": status, "message": text}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class JsonBounds:
    """ASGI middleware: a JSON body over the shape bounds gets a 422 naming where.

    Runs inside ``BodyLimit`` (the body is whole and bounded in bytes).  The body is
    parsed and walked in a worker thread (at most ``JSON_CHECKS`` at once); a body
    that is no JSON is passed on for FastAPI's own 422 (with its line and column).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.limiter = anyio.CapacityLimiter(JSON_CHECKS)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_json(scope):
            await self.app(scope, receive, send)
            return
        message = await receive()  # BodyLimit hands the whole body on in one message
        body = message.get("body", b"") if message["type"] == "http.request" else b""
        if len(body) > IN_PROCESS_BODY_BYTES:  # megabytes: looked at in another process
            problem = await anyio.to_thread.run_sync(
                CHECKER.call, BODY_PROBLEM, body, limiter=self.limiter
            )
        else:
            problem = _too_many_keys(body)
        if problem is not None:
            await _refuse_422(send, *problem)
            return
        scope[BODY_BYTES] = len(body)
        if body.strip():
            if len(body) <= ON_LOOP_BODY_BYTES:
                parsed, problem = parsed_within_bounds(body)
            else:
                parsed, problem = await anyio.to_thread.run_sync(
                    parsed_within_bounds, body, limiter=self.limiter
                )
            if problem is not None:
                await _refuse_422(send, *problem)
                return
            if parsed is not _NO_JSON:
                scope[PARSED_BODY] = parsed
        first: Message | None = message

        async def replay() -> Message:
            nonlocal first
            if first is not None:
                sent, first = first, None
                return sent
            return await receive()

        await self.app(scope, replay, send)


_NO_JSON = object()
Problem = tuple[list[str | int], str]


#: A quote before a colon that closes no key: escaped (inside a string), or one that
#: opens a string (after a bracket, a comma, a colon or whitespace) that starts with ":".
_NOT_A_KEY_END = (b'\\":', b'{":', b'[":', b',":', b':":', b' ":', b'\t":', b'\n":', b'\r":')


def counted_keys(body: bytes) -> int:
    """Object keys of a JSON ``body`` counted in its bytes, never more than it has: a
    key's closing quote right before its colon (``":``), less every ``":`` whose
    quote is escaped or opens a string (``_NOT_A_KEY_END``; a key that ends in one
    of those characters is left out too: only ever fewer).  A few passes of
    ``bytes.count`` over a body of megabytes take milliseconds, where parsing it
    holds the interpreter's lock for tenths of a second."""
    found = body.count(b'":') - sum(body.count(p) for p in _NOT_A_KEY_END)
    return found - (1 if body.lstrip().startswith(b'":') else 0)


def _too_many_keys(body: bytes) -> Problem | None:
    keys = counted_keys(body)
    if keys > MAX_JSON_VALUES:  # refused from its bytes: nothing parsed
        return [], f"at most {MAX_JSON_VALUES} values in a body; this one has {keys} keys or more"
    return None


BODY_PROBLEM = "ringleader.server.limits:body_problem"


def body_problem(body: bytes) -> Problem | None:
    """In the body checker process: where ``body`` exceeds the shape bounds, from its
    bytes first, then parsed (None: within them, or no JSON)."""
    return _too_many_keys(body) or parsed_within_bounds(body)[1]


def json_problem(body: bytes) -> Problem | None:
    """Where ``body`` exceeds the shape bounds and how (None: within them, or no JSON)."""
    return parsed_within_bounds(body)[1]


def parsed_within_bounds(body: bytes) -> tuple[Any, Problem | None]:
    """``body`` parsed (``_NO_JSON`` when it is none: FastAPI's own 422 says where), and
    where it exceeds the shape bounds and how (None: within them).

    The walk is iterative (no recursion however deep the body) and stops at the
    first excess, so its cost is bounded by the body's size."""
    try:
        value = json.loads(body)
    except RecursionError:
        return _NO_JSON, ([], f"nested deeper than {MAX_JSON_DEPTH} levels")
    except ValueError:  # JSONDecodeError, bad UTF-8
        return _NO_JSON, None
    return value, _shape_problem(value)


def _shape_problem(value: Any) -> Problem | None:
    values = 0
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, where = stack.pop()
        if len(where) > MAX_JSON_DEPTH:
            return where, f"nested deeper than {MAX_JSON_DEPTH} levels"
        if isinstance(item, dict):
            if len(item) > MAX_JSON_KEYS:
                return where, f"an object of at most {MAX_JSON_KEYS} keys; this one has {len(item)}"
            children: Any = item.items()
        elif isinstance(item, list):
            children = enumerate(item)
        else:
            continue
        values += len(item)
        if values > MAX_JSON_VALUES:
            return where, f"at most {MAX_JSON_VALUES} values in a body; this one has more"
        stack.extend((child, [*where, key]) for key, child in children)
    return None


async def _refuse_422(send: Send, where: list[str | int], problem: str) -> None:
    """FastAPI's 422 shape (``detail``: loc, msg, type), plus a ``message``."""
    where = [part if isinstance(part, int) else _cut(part) for part in where]
    place = ".".join(str(part) for part in where) or "the body"
    content = {
        "message": f"the request body is too big a structure at {place}: {problem}",
        "detail": [{"loc": ["body", *where], "msg": problem, "type": "value_error"}],
    }
    body = json.dumps(content).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 422, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _cut(key: str, keep: int = 100) -> str:
    """An object's key as a 422 names it: its start (a key may be megabytes long)."""
    return key if len(key) <= keep else key[:keep] + "..."


def is_json(scope: MutableMapping[str, Any]) -> bool:
    """Whether FastAPI would parse the body as JSON: an ``application/json`` or
    ``application/*+json`` content type (FastAPI ignores a body without one)."""
    for key, value in scope.get("headers") or ():
        if key.lower() == b"content-type":
            kind = value.split(b";", 1)[0].strip().lower()
            return kind.startswith(b"application/") and (
                kind == b"application/json" or kind.endswith(b"+json")
            )
    return False


def _content_length(scope: MutableMapping[str, Any]) -> int | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server (h11) refuses it before the app runs
    return None

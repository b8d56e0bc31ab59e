"""Admission: how many requests the server works on at once, and how many of them one
caller's.

Why: a request's route and its dependencies run on the worker threads (anyio's
pool, 40 by default), and from its first query to its end a request holds one of
the database pool's connections.  A caller that sent 150 requests at once (any
requests: 404s will do) had 40 threads each waiting for a connection, while the
requests that held the connections waited for a thread to go on: nothing moved
until the pool's 30 s time-out failed them with 500s, another user's submit and
the reconciler's passes included (issue 22, item 6).  Admission bounds the
requests past the door, so that a thread is always free for a request that holds
a connection, and shares that bound between callers, so one cannot take it all.

Nomenclature: a *caller* is what a request's credential names (its bearer token, or
the UI's session cookie), else its client address; *in flight* is a request from
its arrival until its response starts (a ``logs?follow`` stream leaves when its
lines begin, not when they end).

Invariants:

- at most ``total`` requests are in flight, at most ``per_caller`` of one caller;
  ``total`` stays below the worker threads (``THREADS``), so the threads never all
  wait on connections that waiting requests hold;
- a request over either bound waits, on the event loop alone (no thread, no
  connection, its body unread); a caller with ``queue`` requests already waiting
  gets 429 at once, with ``Retry-After``;
- a caller whose ``follows`` open ``logs?follow`` streams are all running gets 429 for
  the next at the door, before its token is even looked up: re-opening refused follows
  in a loop (the abuse benchmark's attacker) costs the server an HTTP parse each, not
  a database read and two thread hops.  The route's per-user cap stays the rule (a
  user's several tokens share it); this is its cheap first line;
- ``/healthz`` is never held: it answers on the loop, however busy the server is;
- web sockets (exec) pass: they have their own caps.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

THREADS = 40  # anyio's worker threads (its default), set by the app at start-up
TOTAL = 24  # requests in flight at once, below THREADS (the module docstring says why)
PER_CALLER = 8
QUEUE = 64  # a caller's requests waiting past PER_CALLER before 429
UNHELD = frozenset({"/healthz"})


@dataclass
class _Caller:
    slots: asyncio.Semaphore
    waiting: int = 0
    users: int = 0  # requests waiting, in flight or streaming: the record goes when none
    streams: int = 0  # logs?follow answers running now


@dataclass
class Admission:
    """ASGI middleware: the bounds of the module docstring, applied at the door."""

    app: ASGIApp
    total: int = TOTAL
    per_caller: int = PER_CALLER
    queue: int = QUEUE
    follows: int = 8  # --max-follows-per-user
    session_cookie: bytes = b"rl_session="
    _callers: dict[bytes, _Caller] = field(default_factory=dict, init=False)
    _all: asyncio.Semaphore = field(init=False)  # bound to the loop at its first wait
    _held: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._all = asyncio.Semaphore(self.total)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in UNHELD:
            await self.app(scope, receive, send)
            return
        key = self.caller(scope)
        caller = self._callers.get(key)
        if caller is None:
            caller = self._callers[key] = _Caller(asyncio.Semaphore(self.per_caller))
        if caller.slots.locked() and caller.waiting >= self.queue:
            await _too_many(send, self._crowd_text())
            return
        follow = _is_follow(scope)
        if follow and caller.streams >= self.follows:
            await _too_many(send, follows_refusal(self.follows, caller.streams))
            return
        everyone = self._all
        caller.users += 1
        streaming = False
        try:
            await self._admitted(caller, everyone)
            released = False

            def release() -> None:
                nonlocal released
                if not released:
                    released = True
                    self._held -= 1
                    everyone.release()
                    caller.slots.release()

            async def sending(message: Message) -> None:
                nonlocal streaming
                if message["type"] == "http.response.start":
                    release()  # a stream's lines hold nothing here
                    if follow and message.get("status") == 200 and not streaming:
                        streaming = True
                        caller.streams += 1
                await send(message)

            try:
                await self.app(scope, receive, sending)
            finally:
                release()
        finally:
            if streaming:
                caller.streams -= 1
            caller.users -= 1
            if caller.users == 0:
                self._callers.pop(key, None)

    async def _admitted(self, caller: _Caller, everyone: asyncio.Semaphore) -> None:
        """Wait (on the loop) for the caller's slot, then one of everyone's."""
        caller.waiting += 1
        try:
            await caller.slots.acquire()
            try:
                await everyone.acquire()
            except BaseException:
                caller.slots.release()
                raise
        finally:
            caller.waiting -= 1
        self._held += 1

    def caller(self, scope: Scope) -> bytes:
        """Who sent ``scope``: a digest of its credential, else its client address."""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                return _digest(b"a" + value)
            if name == b"cookie" and self.session_cookie in value:
                start = value.index(self.session_cookie)
                return _digest(b"c" + value[start:].split(b";", 1)[0])
        client = scope.get("client") or ("", 0)
        return b"ip:" + str(client[0]).encode()

    def in_flight(self) -> tuple[int, int]:
        """Requests in flight, and callers with a request waiting or in flight."""
        return self._held, len(self._callers)

    def _crowd_text(self) -> str:
        return (
            f"too many requests at once from this caller ({self.per_caller} in progress "
            f"and {self.queue} waiting); retry after a moment"
        )


def follows_refusal(cap: int, held: int) -> str:
    """What a follow past ``--max-follows-per-user`` is told, here or by the route."""
    return (
        f"at most {cap} open log follows per user, and you have {held}: end one (or "
        "read without follow) (ringleader server --max-follows-per-user)"
    )


FOLLOW_WORDS = frozenset({"1", "true", "yes", "on"})  # how FastAPI reads a true bool


def _is_follow(scope: Scope) -> bool:
    """Whether the request asks for a ``logs?follow`` stream.  Any query string is read
    without error (bytes as latin-1, bad escapes replaced): the door never fails."""
    if not str(scope.get("path", "")).endswith("/logs"):
        return False
    text = bytes(scope.get("query_string", b"")).decode("latin-1")
    query = parse_qs(text, keep_blank_values=True, errors="replace")
    return any(value.lower() in FOLLOW_WORDS for value in query.get("follow", []))


def _digest(value: bytes) -> bytes:
    return hashlib.blake2b(value, digest_size=16).digest()


async def _too_many(send: Send, text: str) -> None:
    body = json.dumps({"code": 429, "message": text}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"1"),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})

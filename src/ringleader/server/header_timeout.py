"""A header timeout for uvicorn's HTTP/1.1 protocols (httptools, h11): they have none.

Nomenclature: a connection is *waiting for a header* from the moment it opens, or
from the first byte of a later request, until h11 has parsed a whole request header
(the request line and every header line, up to the blank line).

Invariant: a connection that waits for a header longer than ``header_timeout_s``
is closed.  Without this a client that sends half a request header (or nothing)
holds its connection forever: uvicorn's keep-alive timer runs only after a
response, and is cancelled by the first byte of the next request.  Between
requests an idle connection is that keep-alive timer's (uvicorn's 5 s): a client
busy elsewhere for a moment keeps its connection (a 1 s timer armed at each
response's end closed flood clients' connections under CI's load as they sent).
A request whose header arrived is never cut by this: a long body upload or a long
``logs?follow`` answer is another matter (``limits.BodyLimit``, the follow cap).

One timer per connection, armed when it starts waiting and cancelled when the
header is whole or the connection goes; it checks the parser's state when it
fires, so no data path is slowed by it.

Two protocols: ``HeaderTimeoutHttpTools`` (uvicorn's httptools protocol: the
parser is C, a request's parsing costs a fraction of h11's pure Python, which was
a quarter of the server's time under 32 clients) where ``httptools`` is installed,
else ``HeaderTimeoutH11``; ``protocol_with`` picks.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class _HeaderTimer:
    """The one timer of a connection (either protocol): armed when the connection
    starts waiting for a header, cancelled when it is whole or the connection goes;
    ``_header_late`` (each protocol's) decides what a firing means."""

    header_timeout_s: float = 10.0
    _header_timer: asyncio.TimerHandle | None = None
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        if not self.transport.is_closing():
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_late)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_late(self) -> None:
        raise NotImplementedError


class HeaderTimeoutH11(_HeaderTimer, H11Protocol):
    """uvicorn's h11 protocol, closing a connection that waits too long for a header."""

    def on_response_complete(self) -> None:
        self._cancel_header_timer()  # idle until the next request: uvicorn's keep-alive
        super().on_response_complete()

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and self._between_requests():
            self._arm_header_timer()  # a later request's first byte: its header is due
        super().data_received(data)

    def _between_requests(self) -> bool:
        """No request is being served and h11 has no whole header (it stays IDLE on
        its side until it parsed one)."""
        serving = self.cycle is not None and not self.cycle.response_complete
        return not serving and self.conn.their_state is h11.IDLE

    def _header_late(self) -> None:
        """Close the connection if it still waits for a header."""
        self._header_timer = None
        if self.transport.is_closing() or not self._between_requests():
            return
        self.logger.debug("closing a connection that sent no whole request header in time")
        self.transport.close()


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is not installed: h11 it is
    HttpToolsProtocol = None  # type: ignore[assignment,misc]


if HttpToolsProtocol is not None:

    class HeaderTimeoutHttpTools(_HeaderTimer, HttpToolsProtocol):  # type: ignore[misc,valid-type]
        """uvicorn's httptools protocol, closing a connection that waits too long for
        a header: from the connection's start, or from a later request's first byte
        (httptools' ``on_message_begin``), to ``on_headers_complete``."""

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._header_timer is None:
                self._arm_header_timer()  # a later request's first byte: its header is due

        def on_headers_complete(self) -> None:
            self._cancel_header_timer()
            super().on_headers_complete()

        def _header_late(self) -> None:
            """Still no whole header (the timer is cancelled when one is): close."""
            self._header_timer = None
            if not self.transport.is_closing():
                self.logger.debug("closing a connection that sent no whole request header in time")
                self.transport.close()


def protocol_with(header_timeout_s: float, *, h11_only: bool = False) -> type[Any]:
    """The protocol class for ``uvicorn.Config(http=...)`` with this timeout: httptools'
    where it is installed (unless ``h11_only``), else h11's."""
    base: type[Any] = HeaderTimeoutH11
    if HttpToolsProtocol is not None and not h11_only:
        base = HeaderTimeoutHttpTools
    return type(base.__name__, (base,), {"header_timeout_s": header_timeout_s})

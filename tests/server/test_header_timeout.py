"""The header timeout (server/header_timeout.py) under both of uvicorn's protocols:
httptools (what the server runs where it is installed) and h11.

A real uvicorn on a loopback port with a header timeout of a fraction of a second
and an app that echoes the request's body; raw sockets play the slow clients.  A
connection the server closes reads as EOF; every wait is for that (or an answer),
never a fixed sleep, except where the test must show that something does NOT
happen (then it waits several header timeouts first).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from ringleader.server import header_timeout

TIMEOUT_S = 0.3
PROTOCOLS = ["httptools", "h11"]


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _protocol(name: str) -> type[Any]:
    if name == "httptools" and header_timeout.HttpToolsProtocol is None:
        if os.environ.get("CI") == "true":
            pytest.fail("httptools is not installed (pip install httptools)")
        pytest.skip("httptools is not installed")
    protocol = header_timeout.protocol_with(TIMEOUT_S, h11_only=name == "h11")
    expected = "HeaderTimeoutHttpTools" if name == "httptools" else "HeaderTimeoutH11"
    assert protocol.__name__ == expected
    return protocol


@pytest.fixture(params=PROTOCOLS)
def port(request: pytest.FixtureRequest) -> Iterator[int]:
    """A uvicorn serving ``echo`` with the protocol of the test's parameter."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        echo, http=_protocol(request.param), log_level="warning", timeout_keep_alive=60
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(timeout=60)
    sock.close()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=60)


def _closed_by_server(sock: socket.socket) -> bool:
    """Reads until EOF (True) or an answer arrives (False)."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return not data
        data += chunk
        if b"\r\n\r\n" in data:
            return False


def _answer(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection instead of answering"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
                 .split(b":")[1])  # fmt: skip
    while len(body) < length:
        body += sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), head
    return body


REQUEST = b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"


def test_half_a_header_is_closed(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Le")
        assert _closed_by_server(sock)


def test_nothing_sent_is_closed(port: int) -> None:
    with _connect(port) as sock:
        assert _closed_by_server(sock)


def test_half_a_second_header_on_a_kept_connection_is_closed(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(REQUEST)
        assert _answer(sock) == b"hello"
        sock.sendall(b"GET /y HTTP/1.1\r\nHo")
        assert _closed_by_server(sock)


def test_a_whole_header_with_a_slow_body_is_not_cut(port: int) -> None:
    """The timeout is the header's: a body that takes several of them still arrives."""
    with _connect(port) as sock:
        sock.sendall(b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello")
        time.sleep(TIMEOUT_S * 4)  # what must NOT happen: a close within that
        sock.sendall(b"world")
        assert _answer(sock) == b"helloworld"


def test_an_idle_kept_connection_is_not_cut_by_the_header_timer(port: int) -> None:
    """Between requests a connection is the keep-alive timer's (60 s here)."""
    with _connect(port) as sock:
        sock.sendall(REQUEST)
        assert _answer(sock) == b"hello"
        time.sleep(TIMEOUT_S * 4)  # what must NOT happen: a close within that
        sock.sendall(REQUEST)
        assert _answer(sock) == b"hello"

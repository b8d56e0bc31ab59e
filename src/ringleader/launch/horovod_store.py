"""Horovod's Gloo rendezvous: the key-value store its ranks meet through, over HTTP.

Why here: ``horovodrun --gloo`` serves this store from its own process and tells
every rank where (``HOROVOD_GLOO_RENDEZVOUS_ADDR``/``_PORT``).  Under ringleader
the agent of node 0 (rank 0's host, which every rank reaches: it is
``MASTER_ADDR``) serves it on the attempt's master port, from the attempt's start
until its ranks are stopped, so every attempt meets in a fresh, empty store.

The protocol is Horovod's ``HTTPStore`` (``horovod/common/gloo/http_store.cc``):
``PUT /SCOPE/KEY`` stores the body, ``GET /SCOPE/KEY`` answers it (404 while it
is missing: the client polls), ``DELETE /SCOPE/KEY`` is a rank's "finished with
this scope".  A rank finalizes a scope only after a barrier of every rank of it,
so forgetting that rank's key then is safe.

Imported only by an agent whose gang is Horovod's (``http.server`` costs start-up
time that other launches do not pay).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_VALUE_BYTES = 16 * 2**20  # a rank's address record is tens of bytes
REQUEST_TIMEOUT_S = 10.0


class _Handler(BaseHTTPRequestHandler):
    server: RendezvousStore
    timeout = REQUEST_TIMEOUT_S  # a stalled client cannot hold a thread for ever
    # HTTP/1.0 (the default): one request per connection, as Horovod's client expects.

    def _scope_key(self) -> tuple[str, str] | None:
        parts = self.path.split("/")
        if len(parts) != 3 or not parts[1] or not parts[2]:
            self._answer(400)
            return None
        return parts[1], parts[2]

    def _answer(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_GET(self) -> None:  # http.server's names
        where = self._scope_key()
        if where is None:
            return
        value = self.server.get(*where)
        if value is None:
            self._answer(404)
        else:
            self._answer(200, value)

    def do_PUT(self) -> None:
        where = self._scope_key()
        if where is None:
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._answer(411)
            return
        if not 0 <= length <= MAX_VALUE_BYTES:
            self._answer(413)
            return
        self.server.put(*where, self.rfile.read(length))
        self._answer(200)

    def do_DELETE(self) -> None:
        where = self._scope_key()
        if where is not None:
            self.server.delete(*where)
            self._answer(200)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: a rank polls a missing key every 10 ms until its peers arrive."""


class RendezvousStore(ThreadingHTTPServer):
    """The store, served from a daemon thread by :func:`serve`; ``close`` ends it."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self._values: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
        )

    def get(self, scope: str, key: str) -> bytes | None:
        with self._lock:
            return self._values.get((scope, key))

    def put(self, scope: str, key: str, value: bytes) -> None:
        with self._lock:
            self._values[(scope, key)] = value

    def delete(self, scope: str, key: str) -> None:
        with self._lock:
            self._values.pop((scope, key), None)

    def close(self) -> None:
        """Stop serving and free the port (safe to call twice)."""
        if self._thread.is_alive():
            self.shutdown()
        self.server_close()


def serve(host: str, port: int) -> RendezvousStore:
    """Serve a fresh store on ``host:port`` (``""``: every address) until ``close``."""
    store = RendezvousStore((host, port))
    store._thread.start()
    return store

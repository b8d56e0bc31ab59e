"""A TCP relay for tests: listens on one address, forwards each connection to another.

Why: the session's PostgreSQL listens on 127.0.0.1 only, which a server inside a
test host's network namespace cannot reach; the relay listens on the bridge's
address in the root namespace and forwards to it. Unplugging the host
(``TestHostNetwork.take_down``) then cuts that server off from the database the
way a real partition does: no reset, no answer, just silence.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Relay:
    """Forward ``listen_host``:(free port) -> ``target``; ``close`` ends it all."""

    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server((listen_host, 0))
        self.port = self.server.getsockname()[1]
        self._sockets: list[socket.socket] = [self.server]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

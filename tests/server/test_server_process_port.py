"""The tests' ``ServerProcess``: a port picked free and taken by another process
before the server binds it (the other test worker's, seen in a suite run) is no
failure: the server starts again on a fresh port, and its CLI follows it."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.server.conftest import ServerProcess


def test_a_port_taken_before_the_server_binds_it_is_picked_again(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "home")
    taken = server.port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            server.start()
            assert server.port != taken
            assert server.env["RINGLEADER_URL"] == server.url == f"http://127.0.0.1:{server.port}"
            assert "Address already in use" in (server.home / "server-test.log").read_text()
            assert server.cli("whoami").returncode == 0  # the CLI reaches it where it is
        finally:
            server.kill()

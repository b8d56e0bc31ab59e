"""The server's start-up banner names what a newcomer needs, the backends included."""

from __future__ import annotations

from pathlib import Path

from ringleader.cli.server_process import banner
from ringleader.server.backends import BackendChoice
from ringleader.server.config import ServerConfig


def test_the_banner_names_the_backends_chosen(tmp_path: Path) -> None:
    config = ServerConfig(
        data_dir=tmp_path,
        backends=[BackendChoice("slurm", "debug"), BackendChoice("ssh", "", "cpu")],
    )
    text = banner(config, "http://127.0.0.1:8470")
    assert "backends:       slurm:debug, ssh for pool cpu  (--backend)" in text
    assert "backends:" not in banner(ServerConfig(data_dir=tmp_path), "http://127.0.0.1:8470")

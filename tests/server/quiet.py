"""An in-process app on SQLite with no background work, for input tests: a
submission is validated and stored (or refused) and nothing ever runs, so many
requests are cheap."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from ringleader.server.app import create_app
from ringleader.server.config import ServerConfig
from ringleader.server.inventory import simulated_nodes
from tests.server.conftest import API


def quiet_api(
    tmp_path: Path, *, raise_server_exceptions: bool = False, **config: Any
) -> Iterator[API]:
    home = tmp_path / "home"
    settings = ServerConfig(
        data_dir=home, background=False, nodes=simulated_nodes("1x4gpu"), run_as="server", **config
    )
    app = create_app(settings)
    probed: list[str] = []

    def probe(target: str, python: str, ssh: object) -> dict[str, Any]:
        probed.append(target)  # a valid target: answer as a bare host would
        return {"cpu_cores": 2, "memory_bytes": 2**30, "gpus": [], "ringleader": "0"}

    app.state.probe_node = probe
    app.state.probed = probed
    with TestClient(app, raise_server_exceptions=raise_server_exceptions) as client:
        yield API(client, home)

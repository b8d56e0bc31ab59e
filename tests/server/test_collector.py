"""The server's garbage collector: start-up's objects frozen, full collections rarer
while it runs (each walks everything else: ~250 ms under held load, issue 27 item 6),
and the process's own settings back once it stops (tests run many servers in one)."""

from __future__ import annotations

import gc
from pathlib import Path

from fastapi.testclient import TestClient

from ringleader.server.app import FULL_COLLECTION_EVERY, create_app
from ringleader.server.config import ServerConfig


def test_full_collections_are_rarer_while_the_server_runs(tmp_path: Path) -> None:
    before = gc.get_threshold()
    assert before[2] != FULL_COLLECTION_EVERY
    config = ServerConfig(data_dir=tmp_path / "home", background=False)
    with TestClient(create_app(config)) as client:
        assert client.get("/healthz").status_code == 200
        running = gc.get_threshold()
        assert running == (before[0], before[1], FULL_COLLECTION_EVERY)
        assert gc.get_freeze_count() > 0  # what start-up made is out of the collector's way
    assert gc.get_threshold() == before

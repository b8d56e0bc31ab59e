"""An in-process server whose loops run against a backend that holds every workload:
the benchmark's ``held`` mode (bench/bench_server.py), for tests of submissions under
load that must not start hundreds of real processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from ringleader.server.app import create_app
from ringleader.server.backends.base import Backend, BackendStatus, Capabilities
from ringleader.server.config import ServerConfig
from tests.server.conftest import API


class HeldBackend(Backend):
    """Accepts every workload at once and never runs it: its pods stay Pending."""

    name = "held"
    capabilities = Capabilities(multi_node=True)

    def plan(self, request: Any) -> Any:
        return request

    def submit(self, plan: Any) -> str:
        return f"held:{plan.workload_id}"

    def poll(self, handle: str) -> Any:
        return BackendStatus("Initializing", message="held by the test")

    def is_live(self, handle: str) -> bool:
        return False

    def stop(self, handle: str) -> None:
        return None

    def logs(self, handle: str, pod: str | None = None, tail: int | None = None) -> Any:
        return iter(())


def held_api(tmp_path: Path, database_url: str | None) -> Iterator[API]:
    """The app in-process, its loops on (every 0.1 s) against ``HeldBackend``."""
    home = tmp_path / "home"
    config = ServerConfig(
        data_dir=home, database_url=database_url, loop_interval_s=0.1, run_as="server"
    )
    with TestClient(create_app(config, HeldBackend())) as client:
        yield API(client, home)

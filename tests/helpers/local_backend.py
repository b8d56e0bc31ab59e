"""The local backend's test helpers: a request, its end, its lines, its pods."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from ringleader.server.backends.base import BackendRequest, BackendStatus
from ringleader.server.backends.local import LocalBackend
from ringleader.spec import WorkloadSpec
from tests.conftest import wait_until

FINAL = ("Completed", "Failed", "Stopped")


def make_request(
    run_dir: str | Path,
    name: str = "job",
    workers: int = 2,
    workload_id: str | None = None,
    **spec: Any,
) -> BackendRequest:
    body = {"name": name, "projectId": "team-a", "spec": {"numWorkers": workers, **spec}}
    return BackendRequest(
        workload_id=workload_id or uuid.uuid4().hex[:10],
        name=name,
        project="team-a",
        spec=WorkloadSpec.model_validate(body),
        run_dir=str(run_dir),
    )


def wait_final(backend: LocalBackend, handle: str, timeout: float = 60) -> BackendStatus:
    status = wait_until(
        lambda: (s := backend.poll(handle)).phase in FINAL and s, timeout, "a final phase"
    )
    assert isinstance(status, BackendStatus)
    return status


def wait_lines(
    backend: LocalBackend, handle: str, text: str, count: int, timeout: float = 30
) -> None:
    wait_until(
        lambda: sum(text in line.text for line in backend.logs(handle)) >= count,
        timeout,
        f"{count} log lines with {text!r}",
    )


def pods(status: BackendStatus) -> dict[str, tuple[str, int | None]]:
    return {p.name: (p.phase, p.exit_code) for p in status.pods}


PY = "/opt/venv/bin/python"

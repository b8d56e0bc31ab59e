"""CLI fixtures: the real server process of tests/server (``server``), one with
simulated GPUs (``gpu_server``), and the CLI run as a user types it (``run_cli``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import ServerProcess, running_server, server  # noqa: F401


@pytest.fixture
def gpu_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server whose one node is simulated with 2 GPUs: a gang asking for more waits."""
    with running_server(tmp_path / "home", "--simulate-nodes", "1x2gpu") as proc:
        yield proc


def run_cli(
    *args: str,
    env: dict[str, str],
    columns: int | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``ringleader ARGS`` in ``env`` (plus ``COLUMNS`` when given), output captured."""
    extra = {"COLUMNS": str(columns)} if columns else {}
    full = {k: v for k, v in env.items() if k != "COLUMNS"} | extra
    return subprocess.run(
        [sys.executable, "-m", "ringleader", *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def home_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user whose home is ``home``, without any server's URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}
    return {**env, "RINGLEADER_HOME": str(home), **extra}

"""Shared helpers: run the real ``ringleader`` CLI, find a job's processes, wait.

Tests wait for conditions (``wait_until``), never for fixed times, and end
only processes they started.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ringleader.launch.procs import pids_with_marker
from tests.helpers import workers

# A width the test run did not choose is dropped at once: pytest-xdist's workers are
# started with the COLUMNS/LINES that readline exported in the controller (80 x 24),
# so every CLI a worker's test pipes would wrap its tables at 80 columns.  Tests that
# want a width pass ``COLUMNS`` themselves.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

PYTHON = sys.executable
RINGLEADER = [PYTHON, "-m", "ringleader"]


@pytest.fixture(autouse=True)
def _no_inherited_terminal_size() -> None:
    """Children see no terminal size the test process did not choose.

    GNU readline, once some import initialises it in the pytest process, exports
    COLUMNS/LINES with C's setenv: not in ``os.environ``, yet inherited by every
    subprocess, so a CLI piped to a test would lay its tables out at 80 columns as
    on a terminal.  Tests that want a width pass ``COLUMNS`` themselves.
    """
    for name in ("COLUMNS", "LINES"):
        if name not in os.environ:
            os.unsetenv(name)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadfile``, with the host's shared things and the slow modules minded
    (tests/helpers/workers.py)."""
    return workers.make_scheduler(config, log) if config.getvalue("dist") == "loadfile" else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow modules first (a stable sort: each module's own order is kept), so that
    xdist's workers get them first (tests/helpers/workers.py)."""
    items.sort(key=lambda item: workers.slow_first_key(item.nodeid))


def require(condition: bool, what: str) -> None:
    """Skip when a component is missing, but fail in CI: CI must have it all."""
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {what} is missing")
    pytest.skip(f"{what} is missing")


def wait_until(cond: Callable[[], object], timeout: float, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def job_pids(job_id: str) -> list[int]:
    """Every live process of a job: ranks (by env) and agents (by command line)."""
    pids = set(pids_with_marker(f"RINGLEADER_JOB_ID={job_id}"))
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if job_id.encode() in cmdline and b"ringleader.launch.agent" in cmdline and state != "Z":
            pids.add(int(entry.name))
    return sorted(pids)


def launch(
    *args: str,
    timeout: float = 120,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``ringleader launch ARGS`` to completion and capture its output."""
    return subprocess.run(
        [*RINGLEADER, "launch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def start_launch(
    *args: str, cwd: str | Path | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*RINGLEADER, "launch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
    )


def wait_for_ready(proc: subprocess.Popen[str], ranks: int, word: str = "ready") -> None:
    """Read the launcher's stdout until ``ranks`` lines contain ``word``.

    Fails (instead of hanging) if the launcher's output ends first.
    """
    seen = 0
    while seen < ranks:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(
                f"launcher ended before {ranks} ranks were {word}: {proc.stderr.read()}"
            )
        seen += word in line


@pytest.fixture
def script(tmp_path: Path) -> Callable[[str], str]:
    """Write a Python training script into tmp_path; returns its path."""
    counter = iter(range(1000))

    def write(body: str) -> str:
        path = tmp_path / f"script_{next(counter)}.py"
        path.write_text(body)
        return str(path)

    return write


@pytest.fixture
def mpirun_available() -> None:
    require(shutil.which("mpirun") is not None, "OpenMPI's mpirun (apt: openmpi-bin)")


#: The Horovod environment ``make horovod`` makes (``RINGLEADER_HOROVOD_VENV`` elsewhere).
HOROVOD_VENV = Path(
    os.environ.get("RINGLEADER_HOROVOD_VENV") or Path(__file__).resolve().parent.parent / ".horovod"
)


@pytest.fixture
def horovod_python() -> str:
    """The Python with Horovod and TensorFlow 2.12 (``make horovod``)."""
    python = HOROVOD_VENV / "bin" / "python"
    require(python.exists(), f"Horovod's environment ({python}; make horovod)")
    return str(python)


# PostgreSQL fixtures (postgres_url, pg_url, db_url) for any test module.
pytest_plugins = ["tests.fixtures.postgres", "tests.fixtures.slurmcluster"]

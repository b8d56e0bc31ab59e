"""Every benchmark in bench/ still runs: each one with ``--quick`` as a
subprocess, exit 0, its table printed.

Why: benchmarks are run by hand, rarely, so a change elsewhere broke
``bench/control_plane.py`` unnoticed (its server helper called the ``server``
command without an option added since). ``--quick`` is each benchmark's smoke
run: small sizes, one run, no results written. The control plane's runs on
SQLite only (its PostgreSQL path is the same code over another URL, and
``tests/server`` covers PostgreSQL), to keep this module short on a small
machine. They are started together (``runs``) and each test waits for its own:
they mostly wait on servers and a Slurm cluster, so together they take about the
time of the longest (about 125 s here against about 200 s one after another). No figure is
asserted: a smoke run on a shared machine measures nothing; what is checked is
that it ends well and shows its table.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import require

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
# A hang fails the test instead of stalling the suite.  All ten run at once, beside
# another worker's tests: on 2 loaded cores the control plane's took over 300 s in CI.
LIMIT_S = 600

# (script, its arguments, the start of each table row it must print)
BENCHMARKS = [
    (
        "control_plane.py",
        ["--databases", "sqlite"],
        (
            "| submissions/s, API only",
            "| submissions/s, API only, ~100 KB commands",  # issue 12's phases, reduced
            "| GET `?limit=50` p99 (ms): quiet / under a 16-thread wrong-secret token flood",
        ),
    ),
    (  # issue 22's attacks; the heavy ones (200k keys, 180 MB of metrics) only in full runs
        "control_plane_abuse.py",
        ["--databases", "sqlite", "--attacks", "token_flood,big_body,half_open,follows"],
        "| database | attack | /healthz p99",
    ),
    ("scheduler.py", [], "| metric | value | target |"),
    ("netbench.py", [], "| size | each rank moves"),
    # --quick for launch.py comes with the `launch starts light` work (issue 11, item 9).
    ("launch.py", [], "| metric | ringleader |"),
    ("slurm.py", [], ("| submit -> first step (s) |", "| whole job (s) |")),  # its own cluster
    ("images.py", [], ("| start | last_started_s |", "| start | added by the container")),
    ("image_distribution.py", [], ("| registry |", "| image sync |", "| naive | ")),
    ("frameworks.py", [], ("| tf | to first step |", "| jax | whole job |", "| xgboost |")),
    ("launch_wide.py", [], ("| ringleader |", "| mpirun |", "| torchrun per host |")),
]


@dataclass
class Started:
    """One benchmark's smoke run, started with the others (``runs``)."""

    proc: subprocess.Popen[str] | None  # None: not started (what it needs is missing)
    out: Path
    err: Path
    missing: str = ""


def _slurm_missing() -> str:
    from tests.fixtures.slurmcluster import missing_binaries

    return "" if os.geteuid() == 0 and not missing_binaries() else "root and Slurm's daemons"


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, results_before: dict[Path, int]
) -> Iterator[dict[str, Started]]:
    """Every benchmark's ``--quick`` run, all started at once: each mostly waits (on
    servers, a Slurm cluster, ranks), so together they take little more than the
    longest alone.  Each test then waits for its own."""
    started: dict[str, Started] = {}
    for script, extra, _ in BENCHMARKS:
        base = tmp_path_factory.mktemp(script.removesuffix(".py"))
        out, err = base / "stdout", base / "stderr"
        missing = _slurm_missing() if script == "slurm.py" else ""
        if script.startswith("image") and (os.geteuid() != 0 or shutil.which("podman") is None):
            missing = "root and podman"
        proc = None
        if not missing:
            with open(out, "w") as stdout, open(err, "w") as stderr:
                proc = subprocess.Popen(
                    [sys.executable, str(BENCH / script), "--quick", *extra],
                    cwd=REPO,
                    env={**os.environ, "TMPDIR": str(base)},
                    stdout=stdout,
                    stderr=stderr,
                    text=True,
                    start_new_session=True,
                )
        started[script] = Started(proc, out, err, missing)
    try:
        yield started
    finally:
        for run in started.values():
            if run.proc is not None and run.proc.poll() is None:
                os.killpg(run.proc.pid, signal.SIGKILL)
                run.proc.wait()


@pytest.mark.timeout(LIMIT_S + 120)  # its own wait ends first, with the benchmark's output
@pytest.mark.parametrize(("script", "extra", "table"), BENCHMARKS, ids=[b[0] for b in BENCHMARKS])
def test_benchmark_runs_quick_and_prints_its_table(
    script: str,
    extra: list[str],
    table: str | tuple[str, ...],
    runs: dict[str, Started],
    results_before: dict[Path, int],
) -> None:
    run = runs[script]
    require(not run.missing, run.missing)
    assert run.proc is not None
    try:
        code = run.proc.wait(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        code = None
    stdout, stderr = run.out.read_text(), run.err.read_text()
    output = stdout + stderr
    assert code == 0, f"{script} --quick exited {code}:\n{output[-4000:]}"
    for row in (table,) if isinstance(table, str) else table:
        assert row in stdout, f"{script} --quick printed no {row!r}:\n{output[-4000:]}"
    # A smoke run writes nothing: the committed results stay the measured ones.
    assert _stamps() == results_before


def _stamps() -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in sorted((BENCH / "results").glob("*"))}


@pytest.fixture(scope="module")
def results_before() -> dict[Path, int]:
    """The committed results as they were before any smoke run (``runs`` asks for it,
    so it is taken before they start)."""
    return _stamps()

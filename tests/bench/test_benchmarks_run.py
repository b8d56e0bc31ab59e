"""Every benchmark in bench/ still runs: each one with ``--quick`` as a
subprocess, exit 0, its table printed.

Why: benchmarks are run by hand, rarely, so a change elsewhere broke
``bench/control_plane.py`` unnoticed (its server helper called the ``server``
command without an option added since). ``--quick`` is each benchmark's smoke
run: small sizes, one run, no results written. The control plane's runs on
SQLite only (its PostgreSQL path is the same code over another URL, and
``tests/server`` covers PostgreSQL), to keep this module short on a small
machine. No figure is asserted: a smoke run on a shared machine measures
nothing; what is checked is that it ends well and shows its table.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
LIMIT_S = 240  # a hang fails the test instead of stalling the suite

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
]


@pytest.mark.parametrize(("script", "extra", "table"), BENCHMARKS, ids=[b[0] for b in BENCHMARKS])
def test_benchmark_runs_quick_and_prints_its_table(
    script: str, extra: list[str], table: str | tuple[str, ...], tmp_path: Path
) -> None:
    if script == "slurm.py":
        from tests.conftest import require
        from tests.fixtures.slurmcluster import missing_binaries

        require(os.geteuid() == 0 and not missing_binaries(), "root and Slurm's daemons")
    results = sorted((BENCH / "results").glob("*"))
    stamps = {p: p.stat().st_mtime_ns for p in results}
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{script} --quick exited {done.returncode}:\n{output[-4000:]}"
    for row in (table,) if isinstance(table, str) else table:
        assert row in done.stdout, f"{script} --quick printed no {row!r}:\n{output[-4000:]}"
    # A smoke run writes nothing: the committed results stay the measured ones.
    assert sorted((BENCH / "results").glob("*")) == results
    assert {p: p.stat().st_mtime_ns for p in results} == stamps

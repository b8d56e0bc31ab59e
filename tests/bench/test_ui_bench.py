"""bench/ui.py still runs: ``--quick`` (1,000 workloads, 3 runs) as a subprocess,
exit 0, its table printed, nothing written. No figure is asserted (a smoke run
on a shared machine measures nothing), except what does not depend on speed:
the live update's size when nothing changed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ui_benchmark_runs_quick_and_prints_its_table(tmp_path: Path) -> None:
    results = REPO / "bench" / "results"
    before = {p: p.stat().st_mtime_ns for p in results.glob("*")}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "ui.py"), "--quick"],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "| default page (50 rows, newest first) |" in done.stdout, output[-4000:]
    unchanged = re.search(
        r"^\| live update, nothing changed \|.*?\| ([\d,]+) \| 0 \|", done.stdout, re.M
    )
    assert unchanged and int(unchanged.group(1).replace(",", "")) < 100, done.stdout
    assert {p: p.stat().st_mtime_ns for p in results.glob("*")} == before

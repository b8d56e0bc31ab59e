"""``ringleader launch --grad-compression/--sync-every``: the flags reach every rank as
the variables runtime.prepare reads, bad values stop the launch naming the flag."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SHOW = "import os; print('MODE', os.environ.get('RINGLEADER_GRAD_COMPRESSION'), " \
    "os.environ.get('RINGLEADER_SYNC_EVERY'))"  # fmt: skip


def launch(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "RINGLEADER_HOME": str(tmp_path / "home"),
           "RINGLEADER_URL": "http://127.0.0.1:9"}  # fmt: skip
    argv = [sys.executable, "-m", "ringleader", "launch", "-n", "2", *flags,
            "--", sys.executable, "-c", SHOW]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


@pytest.mark.parametrize(
    ("flags", "seen"),
    [
        ([], "MODE None None"),
        (["--grad-compression", "none"], "MODE None None"),  # exact: no variable at all
        (["--grad-compression", "PowerSGD:3"], "MODE powersgd:3 None"),
        (["--grad-compression", "bf16"], "MODE bf16 None"),
        (["--sync-every", "8"], "MODE None 8"),
    ],
)
def test_the_flags_reach_every_rank(tmp_path: Path, flags: list[str], seen: str) -> None:
    done = launch(tmp_path, *flags)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if "MODE" in line]
    assert len(lines) == 2 and all(line.endswith(seen) for line in lines), done.stdout


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--grad-compression", "gzip"], "--grad-compression: expected none, bf16, fp16"),
        (["--grad-compression", "powersgd:0"], "--grad-compression: powersgd's rank"),
        (["--sync-every", "0"], "--sync-every: expected a whole number"),
        (["--sync-every", "two"], "--sync-every"),
        (["--sync-every", "4", "--grad-compression", "fp16"], "--sync-every: local SGD"),
    ],
)
def test_a_bad_value_exits_2_naming_the_flag(tmp_path: Path, flags: list[str], named: str) -> None:
    done = launch(tmp_path, *flags)
    assert done.returncode == 2
    assert named in done.stderr and "Traceback" not in done.stderr
    assert "MODE" not in done.stdout  # nothing started

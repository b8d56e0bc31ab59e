"""`ringleader plan` run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import home_env

MODELS = """\
import torch

def mlp():
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))

def conv():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 6 * 6, 2))

def not_a_model():
    return 42
"""


def plan(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``ringleader plan ARGS`` at 80 columns, in ``tmp_path`` (where models.py is).

    One OpenMP thread: the test suite runs two tests at once on two cores, and a plan
    timing a model's steps with a thread per core beside the other test's servers once
    ran past its 180 s (a 10 s run alone); the tests read the plan's arithmetic, not
    its timings."""
    (tmp_path / "models.py").write_text(MODELS)
    return subprocess.run(
        [sys.executable, "-m", "ringleader", "plan", *args],
        env=home_env(tmp_path / "home", COLUMNS="80", RINGLEADER_URL="http://127.0.0.1:9",
                     OMP_NUM_THREADS="1"),
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip

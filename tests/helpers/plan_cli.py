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
    """``ringleader plan ARGS`` at 80 columns, in ``tmp_path`` (where models.py is)."""
    (tmp_path / "models.py").write_text(MODELS)
    return subprocess.run(
        [sys.executable, "-m", "ringleader", "plan", *args],
        env=home_env(tmp_path / "home", COLUMNS="80", RINGLEADER_URL="http://127.0.0.1:9"),
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip

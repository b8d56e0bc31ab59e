"""Golden files of generated scripts: compared, and rewritten with RINGLEADER_UPDATE_GOLDEN=1."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "slurm" / "golden"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("RINGLEADER_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; see the module docstring to update it"

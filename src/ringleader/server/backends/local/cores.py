"""Cores other live runs' pods are pinned to, so a new run's pods get their own."""

from __future__ import annotations

from pathlib import Path

from ringleader.launch.detached import (
    FINAL_PHASES,
    STATE_FILE,
    is_detached_supervisor,
    load_launch,
    read_json,
)
from ringleader.runtime.env import CPU_AFFINITY


def pinned_cores(runs_dir: Path, but: Path) -> frozenset[int]:
    """Cores that the pods of other live runs under ``runs_dir`` are pinned to."""
    busy: set[int] = set()
    for run in runs_dir.glob("*"):
        if run == but:
            continue
        state = read_json(run / STATE_FILE)
        launch = load_launch(run) if state and state.get("phase") not in FINAL_PHASES else None
        if launch is None or not is_detached_supervisor(state.get("pid"), run):
            continue
        for env in launch.spec.rank_env.values():
            cores = env.get(CPU_AFFINITY, "")
            busy.update(int(c) for c in cores.split(",") if c.isdigit())
    return frozenset(busy)

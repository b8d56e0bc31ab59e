"""Save and resume training state across restarts and preemptions.

Under ringleader's server every workload has a checkpoint directory that
survives its restarts, its preemptions and a suspend/resume
(``RINGLEADER_CHECKPOINT_DIR``, inside its run directory); elsewhere it is
``$RINGLEADER_CHECKPOINT_DIR`` if set, or nothing (saving is then skipped).
Rank 0 writes, atomically (a preempted writer leaves the previous file
whole); every rank reads the same file, so all resume from the same step.

    state = runtime.load_checkpoint()          # None on the first start
    start = state["epoch"] + 1 if state else 0
    for epoch in range(start, epochs):
        ...
        runtime.save_checkpoint({"epoch": epoch, "model": model.state_dict(), ...})
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

CHECKPOINT_DIR = "RINGLEADER_CHECKPOINT_DIR"
DEFAULT_NAME = "last.pt"


def checkpoint_dir() -> Path | None:
    value = os.environ.get(CHECKPOINT_DIR)
    return Path(value) if value else None


def save_checkpoint(state: Any, name: str = DEFAULT_NAME) -> Path | None:
    """``torch.save`` ``state`` as ``name`` in the checkpoint directory (rank 0 only).

    Returns the path written, or None on other ranks or without a directory.
    """
    import torch

    folder = checkpoint_dir()
    if folder is None or int(os.environ.get("RANK", "0") or 0) != 0:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    partial = folder / f".{name}.{os.getpid()}.partial"
    torch.save(state, partial)
    os.replace(partial, path)  # readers see the old checkpoint or the new one, whole
    return path


def load_checkpoint(name: str = DEFAULT_NAME, map_location: Any = "cpu") -> Any | None:
    """The last saved state, or None when there is none yet."""
    import torch

    folder = checkpoint_dir()
    path = folder / name if folder else None
    if path is None or not path.is_file():
        return None
    return torch.load(path, map_location=map_location, weights_only=False)

"""How a workload's state is said in words: the same in the CLI and the web UI.

Why here: the UI is the server's and must not import the CLI (nor rich through
it); the CLI already reads the server's wire schemas, so both read these.
"""

from __future__ import annotations

from typing import Any

from ringleader.server.schemas import WorkloadOut

WAITING = ("Creating", "Pending", "Resuming")  # no pod of the gang runs yet


def why_waiting(w: WorkloadOut) -> str:
    """Why a workload whose pods do not run yet waits, as its status says it."""
    if w.pending_reason or w.phase_message:
        return w.pending_reason or w.phase_message
    if w.actual_phase == "Creating":
        return "submitted; the scheduler has not looked at it yet"
    if w.actual_phase == "Resuming":
        return "resuming: it goes back to the scheduler's queue"
    return "waiting for the scheduler to place its pods"


def gpu_text(gpus: list[dict[str, Any]]) -> str:
    """``0, 1`` for whole devices; ``0 (0.5)`` / ``2 (40G)`` for fractions."""
    parts = []
    for g in gpus:
        if g.get("memoryBytes"):
            parts.append(f"{g['index']} ({g['memoryBytes'] / 10**9:.3g}G)")
        elif g.get("share", 1) < 1:
            parts.append(f"{g['index']} ({g['share']:g})")
        else:
            parts.append(str(g["index"]))
    return ", ".join(parts) or "-"

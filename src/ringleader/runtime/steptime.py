"""How much of each training step a rank spent waiting on communication.

The timers of :mod:`ringleader.runtime.comm` add here; ``runtime.report`` takes
the mean since its previous call into its record (``"comm"``, seconds per
step), and the server derives the rest: compute = step time - communication.

*Communication* is the time the rank could not hide: from the moment the last
gradient bucket was ready (the end of the backward pass's computation) until
every bucket's all-reduce had finished, plus blocking parameter averaging
(local SGD).  Overlapped all-reduces cost nothing here, as they cost the job
nothing.  Compression work after the last bucket (PowerSGD's second half)
counts as communication: it is the price of the mode.

Standard library only, thread-safe (futures complete on the backend's threads).
"""

from __future__ import annotations

import threading

__all__ = ["add", "take"]

_lock = threading.Lock()
_seconds = 0.0
_steps = 0


def add(seconds: float, steps: int = 0) -> None:
    """Count ``seconds`` of exposed communication and ``steps`` finished steps."""
    global _seconds, _steps
    with _lock:
        _seconds += max(0.0, seconds)
        _steps += steps


def take() -> float | None:
    """Seconds of communication per step since the previous call (None: no step timed)."""
    global _seconds, _steps
    with _lock:
        seconds, steps = _seconds, _steps
        _seconds, _steps = 0.0, 0
    return seconds / steps if steps else None

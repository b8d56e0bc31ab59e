"""Waiting for a workload's phase, whichever way a test reads it (the API in-process, a
server's CLI, its JSON or its text): one loop, one message saying where it stayed."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any, TypeVar

T = TypeVar("T")


def wait_phase(
    read: Callable[[], T],
    phase_of: Callable[[T], str | None],
    phases: Collection[str],
    timeout: float,
    say: Callable[[T], str] = repr,
    every_s: float = 0.1,
) -> T:
    """``read()`` again until ``phase_of`` it is one of ``phases``; what was read last.
    After ``timeout`` seconds an AssertionError names the phases and ``say(last)``."""
    deadline = time.monotonic() + timeout
    while True:
        last = read()
        if phase_of(last) in phases:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"not {'/'.join(sorted(phases))} in {timeout:g} s: {say(last)}")
        time.sleep(every_s)


def actual_phase(workload: dict[str, Any] | None) -> str | None:
    """A workload's JSON (None: not readable yet) -> its ``actualPhase``."""
    return workload.get("actualPhase") if workload else None


def stayed(workload: dict[str, Any] | None) -> str:
    """Where a workload's JSON says it stayed, and why."""
    if not workload:
        return "no workload to read"
    return f"stayed {workload.get('actualPhase')}: {workload.get('phaseMessage')}"

"""What a launch ended with, and the root-cause summary users read first.

The *root cause* is the first failure the supervisor observed in an
attempt; ranks it stopped afterwards are consequences, not causes.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from typing import Any


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass
class RankFailure:
    """The first rank (or host) that failed in an attempt."""

    rank: int | None
    host: str
    code: int
    signal: int | None
    time: float
    stderr_tail: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None
    reason: str = ""

    def describe(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else "agent"
        how = (
            f"killed by {signal_name(self.signal)} (exit {self.code})"
            if self.signal
            else f"exit code {self.code}"
        )
        return f"{who} on {self.host}: {how}" + (f" ({self.reason})" if self.reason else "")


@dataclass
class AttemptResult:
    attempt: int
    started: float
    ended: float = 0.0
    failure: RankFailure | None = None
    stopped_by: int | None = None  # the signal that stopped the launch, if any


@dataclass
class LaunchResult:
    run_id: str
    exit_code: int
    attempts: list[AttemptResult] = field(default_factory=list)
    setup_errors: list[str] = field(default_factory=list)
    # Those of setup_errors that a restart would meet again (agent_startup.LASTING_STAGES).
    lasting_errors: list[str] = field(default_factory=list)

    @property
    def root_cause(self) -> RankFailure | None:
        for attempt in reversed(self.attempts):
            if attempt.failure:
                return attempt.failure
        return None


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1000):03d}"


def render_summary(result: LaunchResult) -> str:
    """The text printed on failure: root cause, its stderr tail, every attempt."""
    lines = [f"job {result.run_id} failed (exit code {result.exit_code})"]
    if result.setup_errors:
        lines += ["no rank was started:", *[f"  {e}" for e in result.setup_errors]]
        return "\n".join(lines)
    cause = result.root_cause
    if cause is not None:
        lines += [
            "Root Cause (first observed failure):",
            f"  time      : {_stamp(cause.time)}",
            f"  host      : {cause.host}",
            f"  rank      : {cause.rank if cause.rank is not None else '-'}",
            f"  exit code : {cause.code}"
            + (f" (signal {cause.signal}: {signal_name(cause.signal)})" if cause.signal else ""),
        ]
        if cause.reason:
            lines.append(f"  reason    : {cause.reason}")
        if cause.error and cause.error.get("traceback"):
            lines.append("  traceback (recorded by the rank):")
            lines += [f"    {ln}" for ln in str(cause.error["traceback"]).rstrip().splitlines()]
        elif cause.error and cause.error.get("message"):
            lines.append(f"  error     : {cause.error['message']}")
        if cause.stderr_tail:
            lines.append(f"  last {len(cause.stderr_tail)} lines of its stderr:")
            lines += [f"    {ln}" for ln in cause.stderr_tail]
    if len(result.attempts) > 1 or (result.attempts and result.attempts[-1].stopped_by):
        lines.append("Attempts:")
        for a in result.attempts:
            if a.failure:
                outcome = a.failure.describe()
            elif a.stopped_by:
                outcome = f"stopped by {signal_name(a.stopped_by)}"
            else:
                outcome = "succeeded"
            lines.append(f"  attempt {a.attempt}: {outcome} after {a.ended - a.started:.1f}s")
    return "\n".join(lines)

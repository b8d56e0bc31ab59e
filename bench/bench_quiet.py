"""Measuring on a shared machine: percentiles, and samples taken while other work
leaves the CPUs alone (``clean``), with what the machine did meanwhile recorded.

Shared by the control-plane benchmarks (bench/control_plane.py, its abuse phases).
``QUIET`` is set from the flags by the benchmark that runs; ``OTHER_LOAD``,
``CALIBRATION_MS`` and ``DROPPED`` collect what ``clean`` saw, for the report.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent


T = TypeVar("T")


def code_version(path: str = "src", key: str = "uncommitted_in_src") -> dict[str, Any]:
    """The commit measured, and (as ``key``) the files under ``path`` that differ from it
    (others may be editing)."""

    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD"),
        key: git("status", "--porcelain", "--", path).splitlines(),
    }


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (p99 of 300 samples is the 297th smallest)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs so far, from /proc/stat."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


# What counts as a quiet machine, and how hard to try for one (set from the flags).
QUIET = {"max_wait_s": 0.0, "idle_below": 0.2, "max_other_cores": 0.1, "tries": 1}


OTHER_LOAD: list[float] = []  # other work's CPU (cores) during each kept sample


CALIBRATION_MS: list[float] = []  # a fixed pure-Python loop, timed before each kept sample


DROPPED: list[dict[str, Any]] = []  # samples measured again because other work ran meanwhile


MARKER = "CONTROL_PLANE_BENCH_RUN"  # in the environment of every process this run starts


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


_OURS: dict[tuple[int, int], bool] = {}


def wait_quiet(what: str) -> float:
    """Wait (at most ``QUIET["max_wait_s"]``) until the CPUs are nearly idle; busy fraction."""
    if QUIET["max_wait_s"] <= 0:
        return math.nan  # not waiting (--quick)
    deadline = time.monotonic() + QUIET["max_wait_s"]
    told = 0.0
    while True:
        before = machine_busy()
        time.sleep(1)
        after = machine_busy()
        busy = (after[0] - before[0]) / max(after[1] - before[1], 1)
        if busy < QUIET["idle_below"] or time.monotonic() > deadline:
            return busy
        if time.monotonic() - told > 15:
            told = time.monotonic()
            print(f"{what}: the machine is {busy:.0%} busy with other work; waiting", flush=True)


def other_cpu() -> dict[int, tuple[int, int]]:
    """pid -> (start time, CPU ticks incl. reaped children) of processes that are not ours.

    Ours carry MARKER in their environment (the servers, their supervisors and
    ranks, the launch peer and the postmaster inherit it) or descend from one
    that does (PostgreSQL's backends overwrite theirs with their titles). This
    process is ours too (its /proc environ predates MARKER), and pid 1 is left
    out: it reaps our detached supervisors when they end.
    """
    mark = f"{MARKER}={os.environ.get(MARKER, '')}".encode()
    stats: dict[int, tuple[int, int, int]] = {}  # pid -> (parent, start, cpu)
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fields = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            cpu = sum(int(x) for x in fields[11:15])
            stats[int(entry.name)] = (int(fields[1]), int(fields[19]), cpu)

    def ours(pid: int) -> bool:
        if pid in (0, 1) or pid not in stats:
            return False
        key = (pid, stats[pid][1])
        if key not in _OURS:
            try:
                _OURS[key] = mark in Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                _OURS[key] = False
            _OURS[key] = _OURS[key] or ours(stats[pid][0])
        return _OURS[key]

    me = os.getpid()
    return {
        pid: (start, cpu)
        for pid, (_parent, start, cpu) in stats.items()
        if pid not in (1, me) and not ours(pid)
    }


class OtherWork:
    """Cores' worth of CPU that other processes used from creation to ``cores()``.

    A process that starts and ends in between, with no parent of its own
    left to reap it, is missed: this flags interference, it cannot subtract it.
    """

    def __init__(self) -> None:
        self.since = time.monotonic()
        self.since_boot_ticks = float(Path("/proc/uptime").read_text().split()[0]) * CLOCK_TICKS
        self.before = other_cpu()

    def cores(self) -> float:
        ticks = 0
        for pid, (start, cpu) in other_cpu().items():
            previous = self.before.get(pid)
            if previous is not None and previous[0] == start:
                ticks += cpu - previous[1]
            elif start >= self.since_boot_ticks:
                ticks += cpu
        return ticks / CLOCK_TICKS / max(time.monotonic() - self.since, 1e-6)


def calibrate() -> float:
    """Milliseconds for a fixed pure-Python loop: how fast this (virtual) CPU is right now.

    Other VMs on the same host can slow every process here alike, which no
    look at this machine's processes shows; this makes such periods visible.
    """
    started = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i * i
    return (time.perf_counter() - started) * 1000


def clean(what: str, measure: Callable[[], T]) -> tuple[T, float]:
    """``measure()`` on a machine that other work left alone, as far as can be seen.

    Waits for idle CPUs, measures, and measures again (at most ``QUIET["tries"]``
    times in all) while other processes used more than ``QUIET["max_other_cores"]``
    meanwhile; returns the result and that load (the last try is kept, load and all).
    """
    for attempt in range(int(QUIET["tries"])):
        wait_quiet(what)
        speed = calibrate()
        meter = OtherWork()
        result = measure()
        other = meter.cores()
        if other <= QUIET["max_other_cores"] or attempt == QUIET["tries"] - 1:
            OTHER_LOAD.append(other)
            CALIBRATION_MS.append(speed)
            return result, other
        DROPPED.append({"what": what, "other_cores": other})
        print(f"{what}: other work used {other:.2f} cores meanwhile; measuring again", flush=True)
    raise AssertionError("unreachable")


def nanmedian(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return statistics.median(kept) if kept else math.nan

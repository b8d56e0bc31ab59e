"""How a detached run stores its ranks' output, and how it is read back.

One file per rank, stream and attempt (``logs/attempt-A/rank-R.stdout``,
``mpirun.stderr`` for an MPI launcher's own output); each line is
``TIME TEXT`` (UNIX time with milliseconds), so a reader can merge every
file in time order and a ``since`` can skip what a follower has seen.  The
writer is the detached supervisor (``launch.detached``); the readers are the
backends' log tails and the web UI.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ringleader.launch.mpi import MPIRUN

STREAMS = ("stdout", "stderr")


def log_file_name(rank: int, stream: str) -> str:
    return f"mpirun.{stream}" if rank == MPIRUN else f"rank-{rank}.{stream}"


def parse_log_file_name(name: str) -> tuple[int, str] | None:
    """``rank-3.stdout`` -> (3, "stdout"); ``mpirun.stderr`` -> (-1, "stderr")."""
    stem, _, stream = name.rpartition(".")
    if stream not in STREAMS:
        return None
    if stem == "mpirun":
        return MPIRUN, stream
    head, _, number = stem.partition("-")
    return (int(number), stream) if head == "rank" and number.isdigit() else None


def format_log_line(t: float, text: str) -> str:
    return f"{t:.3f} {text}\n"


def parse_log_line(line: str) -> tuple[float | None, str]:
    """(time, text) of one stored line; time None if the line has no stamp."""
    line = line.removesuffix("\n")
    stamp, sep, text = line.partition(" ")
    try:
        return float(stamp), text if sep else ""
    except ValueError:
        return None, line


class LogRecord(NamedTuple):
    attempt: int
    rank: int
    stream: str
    time: float
    text: str


def read_logs(log_dir: Path, ranks: set[int] | None = None) -> Iterator[LogRecord]:
    """Every stored line of every attempt (of ``ranks`` only, if given), oldest first."""
    files = []
    for folder in sorted(log_dir.glob("attempt-*")):
        attempt = folder.name.removeprefix("attempt-")
        for path in sorted(folder.iterdir()):
            parsed = parse_log_file_name(path.name)
            if attempt.isdigit() and parsed and (ranks is None or parsed[0] in ranks):
                files.append(_read_log_file(path, int(attempt), *parsed))
    return heapq.merge(*files, key=lambda record: record.time)


def _read_log_file(path: Path, attempt: int, rank: int, stream: str) -> Iterator[LogRecord]:
    last = 0.0
    with open(path, encoding="utf-8", errors="replace", newline="\n") as handle:
        for raw in handle:  # newline="\n": a "\r" inside a line stays in it
            t, text = parse_log_line(raw)
            last = t if t is not None else last
            yield LogRecord(attempt, rank, stream, last, text)

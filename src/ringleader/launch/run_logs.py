"""How a detached run stores its ranks' output, and how it is read back.

One file per rank, stream and attempt (``logs/attempt-A/rank-R.stdout``,
``mpirun.stderr`` for an MPI launcher's own output); each line is
``TIME TEXT`` (UNIX time with milliseconds), so a reader can merge every
file in time order and a ``since`` can skip what a follower has seen.  The
writer is the detached supervisor (``launch.detached``); the readers are the
backends' log tails and the web UI.

Rotation (issue 22, item 10): a file that would pass ``max_log_bytes``
(``RINGLEADER_MAX_LOG_BYTES`` in the supervisor's environment, from
``ringleader server --max-log-bytes``) is renamed ``FILE.1`` (replacing the
previous one) and a new ``FILE`` begun, so each rank stream keeps at most
about twice the cap on disk: the newest output.  A file begun by a rotation
opens with ``#from N`` (no time stamp, so no rank's line can look like it): N
lines of its stream came before it, so a reader that counts lines to send each
once (``logs?follow``) keeps counting across rotations (``LogRecord.skipped``).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, NamedTuple

from ringleader.launch.frameworks import LAUNCHER_RANK as MPIRUN  # mpirun's pseudo-rank

STREAMS = ("stdout", "stderr")
ROTATED = ".1"  # FILE.1: the output before FILE's, kept by one rotation
FROM_MARK = "#from "  # a rotated stream's new file's first line: "#from N"
MAX_LOG_ENV = "RINGLEADER_MAX_LOG_BYTES"
DEFAULT_MAX_LOG_BYTES = 64 * 1024 * 1024
MIN_LOG_BYTES = 4096


def max_log_bytes(environ: Mapping[str, str]) -> int:
    """The cap per log file, from ``MAX_LOG_ENV`` (the default when unset or bad)."""
    try:
        return max(MIN_LOG_BYTES, int(environ.get(MAX_LOG_ENV, DEFAULT_MAX_LOG_BYTES)))
    except ValueError:
        return DEFAULT_MAX_LOG_BYTES


class RotatingLog:
    """One rank stream's log file, rotated to ``FILE.1`` before it passes ``max_bytes``."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path, self.max_bytes = path, max_bytes
        self.handle: IO[str] = open(path, "a", encoding="utf-8", newline="\n")  # noqa: SIM115
        self.size = os.fstat(self.handle.fileno()).st_size
        self.lines = 0  # in this file, after its mark
        self.base = 0  # lines of the stream before this file
        self.rotations = 0

    def write(self, line: str) -> bool:
        """Append ``line`` (one whole stored line); True when this rotated the file."""
        size = len(line.encode("utf-8", "replace"))
        rotated = self.size > 0 and self.size + size > self.max_bytes
        if rotated:
            self.handle.close()
            os.replace(self.path, self.path.with_name(self.path.name + ROTATED))
            self.base += self.lines
            self.lines, self.rotations = 0, self.rotations + 1
            self.handle = open(self.path, "a", encoding="utf-8", newline="\n")  # noqa: SIM115
            mark = f"{FROM_MARK}{self.base}\n"
            self.handle.write(mark)
            self.size = len(mark)
        self.handle.write(line)
        self.handle.flush()  # readers read while the run goes on
        self.size += size
        self.lines += 1
        return rotated

    def close(self) -> None:
        self.handle.close()


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
    # Not a line: this many lines of the stream were rotated away before what follows.
    skipped: int = 0


def log_streams(folder: Path) -> dict[Path, tuple[int, str]]:
    """An attempt folder's streams: each current file's path (``FILE`` of ``FILE.1``
    too, which may be there alone for a moment of a rotation) and its (rank, stream)."""
    found = {}
    for path in sorted(folder.iterdir()):
        current = path.with_name(path.name.removesuffix(ROTATED))
        parsed = parse_log_file_name(current.name)
        if parsed is not None:
            found[current] = parsed
    return found


def read_logs(log_dir: Path, ranks: set[int] | None = None) -> Iterator[LogRecord]:
    """Every stored line of every attempt (of ``ranks`` only, if given), oldest first;
    a rotated stream's lines from ``FILE.1``, then ``FILE``."""
    files = []
    for folder in sorted(log_dir.glob("attempt-*")):
        attempt = folder.name.removeprefix("attempt-")
        if not attempt.isdigit():
            continue
        for path, (rank, stream) in log_streams(folder).items():
            if ranks is None or rank in ranks:
                files.append(_read_stream(path, int(attempt), rank, stream))
    return heapq.merge(*files, key=lambda record: record.time)


def _read_stream(path: Path, attempt: int, rank: int, stream: str) -> Iterator[LogRecord]:
    """One stream's records: ``FILE.1``'s then ``FILE``'s, with a ``skipped`` record
    wherever lines were rotated away (at the start; between the two files when a
    rotation happened while they were read)."""
    last, count = 0.0, 0  # the stream's lines so far, skipped ones included
    for part in (path.with_name(path.name + ROTATED), path):
        try:
            handle = open(part, encoding="utf-8", errors="replace", newline="\n")  # noqa: SIM115
        except FileNotFoundError:
            continue
        with handle:
            for index, raw in enumerate(handle):  # newline="\n": a "\r" stays in its line
                if index == 0 and raw.startswith(FROM_MARK):
                    base = _mark_base(raw)
                    if base > count:
                        yield LogRecord(attempt, rank, stream, last, "", skipped=base - count)
                        count = base
                    continue
                t, text = parse_log_line(raw)
                last = t if t is not None else last
                count += 1
                yield LogRecord(attempt, rank, stream, last, text)


def _mark_base(raw: str) -> int:
    """N of a ``#from N`` line (0 if it is not one)."""
    number = raw[len(FROM_MARK) :].strip()
    return int(number) if number.isdigit() else 0

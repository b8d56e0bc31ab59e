"""The last lines of a local run's logs, read from the end of each file.

``LocalBackend.logs`` reads every stored line from the start (what ``follow``
needs); ``logs?tail=N`` wants only the last N, so this reads each file
backwards in blocks until it holds N lines: the time and memory are the
tail's, not the file's (a 50 MB log's last 5 lines cost a block, not 50 MB).

Invariants: the same lines, pods and order as ``LocalBackend.logs(tail=N)``
(per (attempt, rank, stream) file the last N lines, merged by time, the last
N of those); a line is split at ``\\n`` only, as the writer wrote it; a line
longer than ``MAX_LINE_BYTES`` near the end is shown from its cut, so memory
stays bounded whatever a rank printed.
"""

from __future__ import annotations

import heapq
import os
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from ringleader.errors import NotFound
from ringleader.launch.detached import load_launch
from ringleader.launch.run_logs import (
    FROM_MARK,
    ROTATED,
    LogRecord,
    log_streams,
    parse_log_line,
    read_logs,
)
from ringleader.server.backends.base import LogLine
from ringleader.server.backends.local.planning import pods_from_launch

BLOCK_BYTES = 64 * 1024
MAX_LINE_BYTES = 64 * 1024  # per line wanted: what one file's tail may read at most


def last_lines(path: Path, count: int, block: int = BLOCK_BYTES) -> list[str]:
    """The last ``count`` lines of ``path`` (without their ``\\n``), read backwards."""
    return _read_back(path, count, block)[0]


def _read_back(path: Path, count: int, block: int = BLOCK_BYTES) -> tuple[list[str], bool]:
    """The last ``count`` lines, and whether they begin at the file's start."""
    budget = count * MAX_LINE_BYTES + block
    chunks: list[bytes] = []
    newlines = 0
    with open(path, "rb") as handle:
        end = pos = handle.seek(0, os.SEEK_END)
        while pos > 0 and newlines <= count and end - pos < budget:
            size = min(block, pos)
            pos -= size
            handle.seek(pos)
            data = handle.read(size)
            chunks.append(data)
            newlines += data.count(b"\n")
    data = b"".join(reversed(chunks))
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the file's last newline ends the last line
    from_start = pos == 0 and len(lines) <= count
    return [line.decode("utf-8", errors="replace") for line in lines[-count:]], from_start


def _file_tail(path: Path, count: int, attempt: int, rank: int, stream: str) -> list[LogRecord]:
    """The last ``count`` lines of a stream: ``FILE``'s, and ``FILE.1``'s before them
    when ``FILE`` (begun by a rotation) has fewer."""
    lines, from_start = _read_back(path, count) if path.exists() else ([], True)
    if from_start and lines and lines[0].startswith(FROM_MARK):
        lines = lines[1:]  # a rotation's mark, no line
    older = path.with_name(path.name + ROTATED)
    if from_start and len(lines) < count and older.exists():
        before, from_start = _read_back(older, count - len(lines))
        if from_start and before and before[0].startswith(FROM_MARK):
            before = before[1:]
        lines = before + lines
    parsed = [parse_log_line(line) for line in lines]
    # An unstamped line has its predecessor's time (0 at the file's start); one whose
    # predecessor was not read takes the first time that was.
    last = 0.0 if from_start else next((t for t, _ in parsed if t is not None), 0.0)
    records = []
    for t, text in parsed:
        last = t if t is not None else last
        records.append(LogRecord(attempt, rank, stream, last, text))
    return records


def run_logs(handle: str, pod: str | None) -> tuple[Path, dict[int, str], set[int] | None]:
    """A run's log dir, each rank's pod, and the ranks of ``pod`` (None: every rank);
    NotFound for an unknown run or pod."""
    run_dir = Path(handle).resolve()
    launch = load_launch(run_dir)
    if launch is None:
        raise NotFound("workload run", handle)
    owner = {r: p.name for p in pods_from_launch(launch) for r in p.ranks}
    if pod is not None and pod not in owner.values():
        raise NotFound("pod", pod)
    ranks = None if pod is None else {r for r, name in owner.items() if name == pod}
    return run_dir / launch.log_dir, owner, ranks


def tail_logs(handle: str, pod: str | None, count: int) -> Iterator[LogLine]:
    """The last ``count`` lines of a run (of ``pod`` only, if given), oldest first."""
    log_dir, owner, ranks = run_logs(handle, pod)
    files = []
    for folder in sorted(log_dir.glob("attempt-*")):
        attempt = folder.name.removeprefix("attempt-")
        if not attempt.isdigit():
            continue
        for path, (rank, stream) in log_streams(folder).items():
            if ranks is None or rank in ranks:
                files.append(_file_tail(path, count, int(attempt), rank, stream))
    merged = heapq.merge(*files, key=lambda record: record.time)
    lines = (
        LogLine(owner.get(r.rank, f"rank-{r.rank}"), r.attempt, r.stream, r.text, r.time)
        for r in merged
    )
    return iter(deque(lines, maxlen=count))


def run_dir_logs(run_dir: str, pod: str | None, tail: int | None) -> Iterator[LogLine]:
    """A run directory's log lines, oldest first (one pod's or all merged); with
    ``tail``, only the last ``tail`` lines, read from the files' ends."""
    if tail is not None:  # a tail costs its own size, not the files'
        return tail_logs(run_dir, pod, tail)
    log_dir, owner, ranks = run_logs(run_dir, pod)
    return (
        LogLine(owner.get(r.rank, f"rank-{r.rank}"), r.attempt, r.stream, r.text, r.time, r.skipped)
        for r in read_logs(log_dir, ranks)
    )

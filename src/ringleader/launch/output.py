"""Where rank output goes: the terminal (prefixed, filtered) and log files.

A line arrives whole from the agent, so writing it with its prefix in one
``write`` keeps ranks from mixing inside a line.  stdout stays stdout and
stderr stays stderr.  Log files keep every rank even when the console shows
only some (``--ranks``): ``DIR/attempt-N/rank-R.stdout|stderr``, made for every
rank when the attempt starts.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import IO, Protocol


class OutputSink(Protocol):
    """Receives rank output and the supervisor's own notices."""

    def line(
        self, *, rank: int, world: int, host: str, stream: str, text: str, attempt: int
    ) -> None: ...

    def notice(self, text: str) -> None: ...

    def attempt_started(self, attempt: int, ranks: list[int]) -> None: ...

    def close(self) -> None: ...


def prefix(rank: int, world: int, host: str) -> str:
    return f"[{rank}/{world} {host}] "


class ConsoleSink:
    """Prefixed rank lines on the terminal, optional per-rank log files."""

    def __init__(
        self,
        *,
        show_ranks: set[int] | None = None,
        with_prefix: bool = True,
        log_dir: str | Path | None = None,
        stdout: IO[str] | None = None,
        stderr: IO[str] | None = None,
    ) -> None:
        self.show_ranks = show_ranks
        self.with_prefix = with_prefix
        self.log_dir = Path(log_dir) if log_dir else None
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self._files: dict[tuple[int, int, str], IO[str]] = {}
        self._lock = threading.Lock()

    def _log_file(self, attempt: int, rank: int, stream: str) -> IO[str]:
        key = (attempt, rank, stream)
        handle = self._files.get(key)
        if handle is None:
            assert self.log_dir is not None
            folder = self.log_dir / f"attempt-{attempt}"
            folder.mkdir(parents=True, exist_ok=True)
            handle = open(folder / f"rank-{rank}.{stream}", "a", encoding="utf-8")  # noqa: SIM115
            self._files[key] = handle
        return handle

    def attempt_started(self, attempt: int, ranks: list[int]) -> None:
        """Every rank's two files exist from the attempt's start, empty for a rank that
        prints nothing (a reader finds each rank's, as torchrun's --log-dir makes them)."""
        if self.log_dir is None:
            return
        with self._lock:
            for key in [k for k in self._files if k[0] < attempt]:  # that attempt has ended
                self._files.pop(key).close()
            for rank in ranks:
                for stream in ("stdout", "stderr"):
                    self._log_file(attempt, rank, stream)

    def line(
        self, *, rank: int, world: int, host: str, stream: str, text: str, attempt: int
    ) -> None:
        with self._lock:
            if self.log_dir is not None:
                handle = self._log_file(attempt, rank, stream)
                handle.write(text + "\n")
                handle.flush()
            if self.show_ranks is not None and rank not in self.show_ranks:
                return
            out = self.stderr if stream == "stderr" else self.stdout
            head = prefix(rank, world, host) if self.with_prefix else ""
            try:
                out.write(f"{head}{text}\n")
                out.flush()
            except (BrokenPipeError, ValueError):
                pass

    def notice(self, text: str) -> None:
        with self._lock:
            try:
                self.stderr.write(f"ringleader: {text}\n")
                self.stderr.flush()
            except (BrokenPipeError, ValueError):
                pass

    def close(self) -> None:
        with self._lock:
            for handle in self._files.values():
                handle.close()
            self._files.clear()

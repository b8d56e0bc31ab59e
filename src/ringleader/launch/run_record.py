"""A detached run's record in its run directory: ``launch.json`` read
(``LaunchFile``), ``state.json`` written whole, and the ``Recorder`` that writes
``state.json`` and each attempt's per-rank logs as the supervisor goes.

Kept apart from ``detached.py`` so that each reads whole: there is the process (its
environment, its signals, its argv); here is what it leaves in the run directory and
how that is written and read, which the server's backends and ``slurm_job.py`` use
too (through ``detached``'s names, which stay theirs).  Together they were past the
house's 400 lines.  The run directory's layout (every file, every field of
``state.json``) is in ``detached.py``'s docstring, beside its entry point.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ringleader.hosts import Host
from ringleader.launch.mpi import MPIRUN, MPIRUN_NOTICE
from ringleader.launch.plan import LaunchPlan, LaunchSpec
from ringleader.launch.result import AttemptResult, LaunchResult, render_summary, signal_name
from ringleader.launch.run_logs import RotatingLog, format_log_line, log_file_name, max_log_bytes

LAUNCH_FILE = "launch.json"
STATE_FILE = "state.json"
SUPERVISOR_LOG = "supervisor.log"
FINAL_PHASES = ("Succeeded", "Failed", "Stopped")


# ----- the run directory's files ------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LaunchFile:
    """What ``launch.json`` holds: the launch and what the caller keeps beside it."""

    spec: LaunchSpec
    attempt_offset: int = 0
    pods: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    log_dir: str = "logs"
    # The OS account ranks run as ({"name", "uid", "gid", "home"}); None: as the supervisor.
    run_as: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = {
            "spec": dataclasses.asdict(self.spec),
            "attempt_offset": self.attempt_offset,
            "pods": self.pods,
            "log_dir": self.log_dir,
        }
        return data | ({"run_as": self.run_as} if self.run_as else {})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LaunchFile:
        spec = dict(data["spec"])
        spec["hosts"] = [Host(**h) for h in spec["hosts"]]
        return cls(
            spec=LaunchSpec(**spec),
            attempt_offset=int(data.get("attempt_offset", 0)),
            pods=list(data.get("pods", [])),
            log_dir=str(data.get("log_dir", "logs")),
            run_as=dict(data["run_as"]) if data.get("run_as") else None,
        )

    @classmethod
    def load(cls, run_dir: str | Path) -> LaunchFile:
        return cls.from_json(json.loads((Path(run_dir) / LAUNCH_FILE).read_text()))


def load_launch(run_dir: Path) -> LaunchFile | None:
    """The run's ``launch.json``, or None when it is missing or unreadable."""
    data = read_json(run_dir / LAUNCH_FILE)
    try:
        return LaunchFile.from_json(data) if data else None
    except (KeyError, TypeError, ValueError):
        return None


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Readers see the old file or the new one, never a torn one.

    The temporary file gets a random name and is created exclusively, never
    through a symlink: nothing planted beside ``path`` is written through.
    """
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, flags, 0o666)  # less the umask, as write_text did
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> dict[str, Any] | None:
    """The file's object, or None when it is missing or not (yet) valid."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ----- the recorder: sink and observer of one supervisor ------------------------
class Recorder:
    """Writes rank output to per-attempt files and progress to ``state.json``.

    One object is both the supervisor's sink and its observer because both
    need the current attempt (mpirun's lines arrive as notices, unnumbered).
    """

    def __init__(
        self,
        run_dir: Path,
        launch: LaunchFile,
        *,
        clock: Callable[[], float] = time.time,
        notices: IO[str] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.log_dir = run_dir / launch.log_dir
        self.offset = launch.attempt_offset
        self.clock = clock
        self.notices = notices or sys.stderr
        self._files: dict[tuple[int, int, str], RotatingLog] = {}
        # Each rank stream's file is rotated past this (run_logs.RotatingLog).
        self.max_log_bytes = max_log_bytes(os.environ)
        self._failed_in_attempt = False
        now = clock()
        self.state: dict[str, Any] = {
            "pid": os.getpid(),
            "started_at": now,
            "updated_at": now,
            "phase": "Starting",
            "attempt": self.offset,
            "ranks": {},
            "exit_code": None,
            "reason": None,
            "summary": None,
        }

    def write(self) -> None:
        self.state["updated_at"] = self.clock()
        write_json_atomic(self.run_dir / STATE_FILE, self.state)

    # ----- OutputSink ----------------------------------------------------------------
    def line(
        self, *, rank: int, world: int, host: str, stream: str, text: str, attempt: int
    ) -> None:
        self._append(attempt + self.offset, rank, stream, text)

    def attempt_started(self, attempt: int, ranks: list[int]) -> None:
        """Nothing to make: a workload's logs are read per pod from what its ranks wrote."""

    def notice(self, text: str) -> None:
        if text.startswith(MPIRUN_NOTICE):
            self._append(self.state["attempt"], MPIRUN, "stderr", text[len(MPIRUN_NOTICE) :])
            return
        self.notices.write(format_log_line(self.clock(), f"ringleader: {text}"))
        self.notices.flush()

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()

    def _append(self, attempt: int, rank: int, stream: str, text: str) -> None:
        key = (attempt, rank, stream)
        log = self._files.get(key)
        if log is None:
            folder = self.log_dir / f"attempt-{attempt}"
            folder.mkdir(parents=True, exist_ok=True)
            log = RotatingLog(folder / log_file_name(rank, stream), self.max_log_bytes)
            self._files[key] = log
        if log.write(format_log_line(self.clock(), text)):
            self._rotated(f"attempt-{attempt}/{log.path.name}", rank, stream)

    def _rotated(self, name: str, rank: int, stream: str) -> None:
        """Record a rotation in ``state.json`` (the server's status says so)."""
        rotated = self.state.setdefault("logs_rotated", {})
        if name not in rotated:
            rotated[name] = {"rank": rank, "stream": stream, "max_bytes": self.max_log_bytes}
            self.write()

    # ----- SupervisorObserver -------------------------------------------------------
    def on_phase(self, phase: str) -> None:
        if phase in FINAL_PHASES:
            return  # written by finish(), with the exit code, once every agent is gone
        self.state["phase"] = phase
        self.write()

    def on_attempt_started(self, attempt: int, plan: LaunchPlan) -> None:
        ranks = set(range(plan.world_size)) | {r.rank for n in plan.nodes for r in n.ranks}
        self.close()  # the previous attempt's files: every line of it has arrived
        self.state["attempt"] = attempt + self.offset
        self.state["ranks"] = {
            str(r): {"phase": "Running", "exit_code": None, "signal": None} for r in sorted(ranks)
        }
        self._failed_in_attempt = False
        self.write()

    def on_rank_exit(self, attempt: int, rank: int, code: int, signal: int | None) -> None:
        stopping = self.state["phase"] == "Stopping"  # a stop or a failure came first
        if code == 0:
            phase = "Succeeded"
        elif rank == MPIRUN:  # mpirun fails with the rank it lost, as Run:ai's launcher pod
            phase = "Failed" if self._failed_in_attempt or not stopping else "Stopped"
        elif self._failed_in_attempt or stopping:
            phase = "Stopped"  # a consequence of the root cause, not a cause
        else:
            phase, self._failed_in_attempt = "Failed", True
        self.state["ranks"][str(rank)] = {"phase": phase, "exit_code": code, "signal": signal}
        self.write()

    def on_attempt_ended(self, outcome: AttemptResult) -> None:
        ok = outcome.failure is None and outcome.stopped_by is None
        for info in self.state["ranks"].values():
            if info["phase"] == "Running":
                info["phase"] = "Succeeded" if ok else "Stopped"
        self.write()

    def on_progress(self, host: str, text: str, done: bool) -> None:
        self.state.setdefault("progress", {})[host] = {"text": text, "done": done}
        self.write()

    def finish(self, phase: str, result: LaunchResult, stopped_by: int | None) -> None:
        """The final state, written once the supervisor has reaped every agent."""
        if stopped_by is not None and phase == "Failed":
            phase = "Stopped"  # stopped before the first attempt or between attempts
        self.state["phase"] = phase
        self.state["exit_code"] = result.exit_code
        if result.exit_code != 0:
            cause = result.root_cause
            if phase == "Stopped":
                reason = f"stopped by {signal_name(stopped_by or signal.SIGTERM)}"
            elif result.setup_errors:
                reason = "no rank was started: " + "; ".join(result.setup_errors)
                # The server restarts a gang it placed unless a restart would meet this again.
                self.state["lasting"] = bool(result.lasting_errors)
            else:
                reason = cause.describe() if cause else f"exit code {result.exit_code}"
            self.state["reason"] = reason
            self.state["summary"] = render_summary(result)
        self.write()

"""A supervisor that runs on its own, recording a launch into its run directory.

``python -m ringleader.launch.detached RUN_DIR`` is what the control plane's
local backend starts for each workload.  It runs in its own session with its
stdio on files, so the server may stop, restart or be killed with -9 while
workloads go on; a new server re-adopts them by their run directory.

The run directory (everything a reader needs; the backend owns the layout of
``launch.json``'s ``pods``, this module owns the rest):

- ``launch.json``: ``{"spec": LaunchSpec, "attempt_offset", "pods", "log_dir",
  "run_as"}`` written by the caller before the start; ``pods`` is opaque here.
  ``run_as`` (``{"name", "uid", "gid", "home"}``, optional): the OS account
  this host's ranks run as; the supervisor and agent stay the caller's user,
  the agent drops each rank to it (``RINGLEADER_RUN_AS`` in the agent's own
  environment, never a rank's); with ``"sudo"`` (a non-root caller) the agent
  itself is started as the account instead (``LaunchSpec.sudo``).
- ``state.json``: rewritten whole (temp file + ``os.replace``) on every
  change, so a reader never sees half of it::

    {"pid", "started_at", "updated_at", "phase", "attempt",
     "ranks": {"0": {"phase", "exit_code", "signal"}, ...},
     "exit_code", "reason", "summary", "logs_rotated", "progress"}

  ``phase`` is the supervisor's (Starting, Running, Restarting, Stopping,
  Succeeded, Failed, Stopped); a final phase is written only after every
  agent and rank is gone.  ``attempt`` counts from ``attempt_offset`` (a
  resumed workload goes on numbering).  Rank phases: Running, Succeeded,
  Failed (the first non-zero exit of an attempt: the root cause), Stopped
  (ended non-zero after that, by a stop, or never reported).  Rank ``-1`` is
  mpirun under the mpi framework.  ``reason`` is one line, ``summary`` the
  launcher's root-cause text; both only when the exit code is not 0.
  ``logs_rotated`` (once a log passed its cap, ``run_logs.RotatingLog``):
  ``{"attempt-N/rank-R.stream": {"rank", "stream", "max_bytes"}}``.
  ``progress`` (while Starting, an image pull): ``{"HOST": {"text", "done"}}``, each
  host's latest line (``image_pull``).
- ``logs/attempt-N/rank-R.stdout|stderr`` (``mpirun.stderr`` for mpirun's own
  words, which reach the sink as notices without their stream): one line per
  output line, ``"<unix seconds, 3 decimals> <text>"`` (the time the
  supervisor received it), ``\\n``-separated, UTF-8, ``N`` as in ``attempt``.
- ``supervisor.log``: this process's own stdio (opened by the caller): the
  supervisor's notices as ``"<time> ringleader: <text>"``, and any crash.
- ``spawned``: this host's agent's record of each rank it started (pid and
  start time, ``launch/spawned.py``): how ``exec`` knows a pod's process
  without trusting anything the process can set.  Not written by an agent
  started as another account (sudo): the run dir is not that account's.

Who is who: the supervisor of a run dir is the live process whose argv is
``detached_argv(..., RUN_DIR)`` (a pid in ``state.json`` alone may have been
reused); a job's processes, for a sweep without a cgroup, are its ranks
(``RINGLEADER_JOB_ID`` in their environment) and its agents (``--job-id`` in
their argv): both forgeable, so nothing that hands a process power (``exec``)
picks one by them alone (``spawned``, the pod's cgroup, its account).

SIGTERM (or SIGINT/SIGHUP) asks the supervisor to stop the gang with its
grace period; the run then ends Stopped.

The environment (``scoped_environ``): a supervisor gets only the caller's
variables that ``POD_ENV_NAMES``/``POD_ENV_PREFIXES`` allow (what a process
needs to run: PATH, HOME, the locale ...) plus ``SUPERVISOR_ENV`` (its own
settings, e.g. the SSH config for SSH nodes), which it drops before it
starts any agent; agents and ranks inherit the rest, and ranks add what the
launch sets for them.  So no server setting or secret (``RINGLEADER_HOME``,
a database URL, a cloud token) reaches a pod.  docs/backends.md: "Pod environment".
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from ringleader.errors import InvalidSpec
from ringleader.hosts import Host
from ringleader.launch import frameworks
from ringleader.launch.container_runtime import RUNTIME_ENV, agent_only
from ringleader.launch.mpi import MPIRUN, MPIRUN_NOTICE
from ringleader.launch.plan import LaunchPlan, LaunchSpec
from ringleader.launch.procs import job_processes, process_argv

__all__ = ["job_processes", "process_argv"]  # their old home: callers may import them here
from ringleader.launch.rank_process import RUN_AS_VAR
from ringleader.launch.result import AttemptResult, LaunchResult, render_summary, signal_name
from ringleader.launch.run_logs import (
    MAX_LOG_ENV,
    RotatingLog,
    format_log_line,
    log_file_name,
    max_log_bytes,
)
from ringleader.launch.spawned import RECORD_VAR, SPAWNED_FILE
from ringleader.launch.supervisor import Supervisor

MODULE = "ringleader.launch.detached"
LAUNCH_FILE = "launch.json"
STATE_FILE = "state.json"
SUPERVISOR_LOG = "supervisor.log"
FINAL_PHASES = ("Succeeded", "Failed", "Stopped")


#: The caller's variables a pod sees (the allow-list; docs/backends.md, "Pod environment").
POD_ENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TERM",
        "PYTHONPATH",  # ranks import the same ringleader as their supervisor
        "LD_LIBRARY_PATH",  # where the server's Python finds CUDA and MPI libraries
    }
)
POD_ENV_PREFIXES = ("LC_",)
#: The supervisor's own settings: passed to it, dropped before it starts agents.
SUPERVISOR_ENV = frozenset({"RINGLEADER_SSH_CONFIG", MAX_LOG_ENV})


def scoped_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """What of ``environ`` a detached supervisor (and so its pods) may get."""
    return {
        k: v
        for k, v in environ.items()
        if k in POD_ENV_NAMES
        or k in SUPERVISOR_ENV
        or k in RUNTIME_ENV  # for its agents' podman/docker; no pod sees them
        or k.startswith(POD_ENV_PREFIXES)
    }


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


# ----- processes -----------------------------------------------------------------
def detached_argv(python: str, run_dir: Path) -> list[str]:
    return [python, "-m", MODULE, str(run_dir)]


def is_detached_supervisor(pid: object, run_dir: Path) -> bool:
    """True only for a live detached supervisor of this very run dir (not a reused pid)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    argv = process_argv(pid) or []
    return MODULE.encode() in argv and str(run_dir).encode() in argv


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


# ----- the process ---------------------------------------------------------------
def run(run_dir: Path, *, clock: Callable[[], float] = time.time) -> int:
    """Supervise the launch in ``run_dir`` to its end; the launch's exit code."""
    stop: list[int] = []
    supervisor: Supervisor | None = None

    def on_signal(signum: int, _frame: object) -> None:
        stop.append(signum)
        if supervisor is not None:
            supervisor.request_stop(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    try:
        launch = LaunchFile.load(run_dir)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        broken = LaunchFile(spec=LaunchSpec([], [], "", "", ""))
        recorder = Recorder(run_dir, broken, clock=clock)
        problem = f"cannot read {run_dir / LAUNCH_FILE}: {exc}"
        recorder.state.update(phase="Failed", exit_code=2, reason=problem, summary=problem)
        recorder.write()
        return 2
    recorder = Recorder(run_dir, launch, clock=clock)
    recorder.write()
    try:
        cls = frameworks.get(launch.spec.framework).load_supervisor()
        supervisor = cls(launch.spec, recorder, observer=recorder)
    except InvalidSpec as exc:
        recorder.state.update(phase="Failed", exit_code=2, reason=str(exc), summary=str(exc))
        recorder.write()
        return 2
    for name in SUPERVISOR_ENV:  # read by the supervisor above; no agent or rank sees them
        os.environ.pop(name, None)
    agent_only(os.environ)  # the container runtime's settings: its agents', not its ranks'
    # Who this host's agent starts ranks as: only launch.json (the server's) says so.
    os.environ.pop(RUN_AS_VAR, None)
    if launch.run_as and not launch.run_as.get("sudo"):  # through sudo: the agent is it
        os.environ[RUN_AS_VAR] = f"{int(launch.run_as['uid'])}:{int(launch.run_as['gid'])}"
    # Where this host's agent records the ranks it spawns (a previous run's record goes).
    os.environ.pop(RECORD_VAR, None)
    with contextlib.suppress(FileNotFoundError):
        (run_dir / SPAWNED_FILE).unlink()
    # (through sudo the account's agent gets no variable: this supervisor records it)
    os.environ[RECORD_VAR] = str(run_dir / SPAWNED_FILE)
    if stop:
        supervisor.request_stop(stop[0])
    try:
        result = supervisor.run()
    finally:
        recorder.close()
    recorder.finish(supervisor.state.phase, result, stop[0] if stop else None)
    return min(result.exit_code, 255)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m ringleader.launch.detached RUN_DIR", file=sys.stderr)
        return 2
    return run(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())

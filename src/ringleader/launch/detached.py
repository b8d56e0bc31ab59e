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

How those files are read and written, and the ``Recorder`` (the supervisor's sink
and observer) that writes ``state.json`` and the logs: ``run_record.py``.  Here is
the process that records them: its environment, its signals, its argv.

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
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ringleader.errors import InvalidSpec
from ringleader.launch import frameworks
from ringleader.launch.container_runtime import RUNTIME_ENV, agent_only
from ringleader.launch.plan import LaunchSpec
from ringleader.launch.procs import job_processes, process_argv
from ringleader.launch.rank_process import RUN_AS_VAR
from ringleader.launch.run_logs import MAX_LOG_ENV
from ringleader.launch.run_record import (
    FINAL_PHASES,
    LAUNCH_FILE,
    STATE_FILE,
    SUPERVISOR_LOG,
    LaunchFile,
    Recorder,
    load_launch,
    read_json,
    write_json_atomic,
)
from ringleader.launch.spawned import RECORD_VAR, SPAWNED_FILE
from ringleader.launch.supervisor import Supervisor

# What other modules and tests import from here: procs.py's two (their old home) and
# the run directory's record, run_record.py's since the split (the server's backends
# and slurm_job.py read a run directory through this module's names).
__all__ = [
    "FINAL_PHASES",
    "LAUNCH_FILE",
    "STATE_FILE",
    "SUPERVISOR_LOG",
    "LaunchFile",
    "Recorder",
    "job_processes",
    "load_launch",
    "process_argv",
    "read_json",
    "write_json_atomic",
]

MODULE = "ringleader.launch.detached"


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


# ----- processes -----------------------------------------------------------------
def detached_argv(python: str, run_dir: Path) -> list[str]:
    return [python, "-m", MODULE, str(run_dir)]


def is_detached_supervisor(pid: object, run_dir: Path) -> bool:
    """True only for a live detached supervisor of this very run dir (not a reused pid)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    argv = process_argv(pid) or []
    return MODULE.encode() in argv and str(run_dir).encode() in argv


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

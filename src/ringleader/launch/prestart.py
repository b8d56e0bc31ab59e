"""Start this host's agent while the launcher is still importing.

Why: a local launch pays two interpreter starts in a row, the launcher's and
its agent's (~50 ms of imports each).  ``ringleader launch`` calls
:func:`prestart` first thing, before it reads its options, so the agent's
start overlaps the launcher's own on another core; the supervisor then
adopts it with :func:`take` instead of starting one (bench/launch.py's fixed
cost against mpirun).

The agent is started for a run id chosen here (``--run-id`` when given),
which the launch then uses (:func:`run_id`), so it carries its job's id on
its command line like every agent.  Safe whatever happens next: it is in its
own session like every agent and exits when its stdin closes, so a launch
that fails before adopting it, or is killed, leaves nothing behind;
:func:`discard` ends it at once when it was not used.  Only the standard
library is imported here, and ``subprocess`` only when an agent is started.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from subprocess import Popen

#: Options that put ranks on other hosts: no local agent is started ahead for them.
REMOTE_FLAGS = ("--hostfile", "-H", "--hosts", "--slurm")
_prestarted: Popen[bytes] | None = None
_run_id: str | None = None  # the job the agent started ahead is for


def new_run_id() -> str:
    """``rl-`` and 8 random hex digits (os.urandom: ``secrets`` costs imports)."""
    return f"rl-{os.urandom(4).hex()}"


def run_id() -> str | None:
    """The run id an agent was started ahead for (the launch must use it), if any."""
    return _run_id


def agent_env() -> dict[str, str]:
    """An agent's environment: the launcher's, less any job marker it inherited."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_JOB")}


def wants_local_agent(launch_argv: list[str]) -> bool:
    """True when ``launch``'s options (before ``--``) run ranks on this host only."""
    options = launch_argv[: launch_argv.index("--")] if "--" in launch_argv else launch_argv
    if os.environ.get("SLURM_JOB_ID") and "--no-slurm" not in options:
        return False  # inside a Slurm allocation: agents start on its nodes through srun
    for arg in options:
        flag = arg.split("=", 1)[0]
        if flag in REMOTE_FLAGS or flag in ("--help", "-h") or arg.startswith("-H"):
            return False
    return "--" in launch_argv


def given_run_id(launch_argv: list[str]) -> str | None:
    """``--run-id X`` or ``--run-id=X`` among launch's options, if present."""
    options = launch_argv[: launch_argv.index("--")] if "--" in launch_argv else launch_argv
    for i, arg in enumerate(options):
        if arg.startswith("--run-id="):
            return arg.split("=", 1)[1]
        if arg == "--run-id" and i + 1 < len(options):
            return options[i + 1]
    return None


def prestart(launch_argv: list[str]) -> None:
    """Start a local agent ahead when this launch will need one; never raises."""
    global _prestarted, _run_id
    if _prestarted is not None or not wants_local_agent(launch_argv):
        return
    from subprocess import PIPE, Popen

    job_id = given_run_id(launch_argv) or new_run_id()
    try:
        _prestarted = Popen(
            [sys.executable, "-m", "ringleader.launch.agent", "--job-id", job_id],
            stdin=PIPE,
            stdout=PIPE,
            stderr=PIPE,
            env=agent_env(),
            start_new_session=True,
        )
    except OSError:
        return  # the supervisor starts one the usual way and reports why
    _run_id = job_id


def take(python: str, job_id: str) -> Popen[bytes] | None:
    """The agent started ahead, when it is for ``job_id``, runs ``python`` and lives."""
    global _prestarted
    proc, _prestarted = _prestarted, None
    if proc is None:
        return None
    if job_id != _run_id or python != sys.executable or proc.poll() is not None:
        _end(proc)
        return None
    return proc


def discard() -> None:
    """End an agent started ahead that no launch took (a bad option, say)."""
    global _prestarted
    proc, _prestarted = _prestarted, None
    if proc is not None:
        _end(proc)


def _end(proc: Popen[bytes]) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    try:
        proc.kill()
        proc.wait(timeout=5)
    except Exception:  # already gone; or stuck, and its closed stdin ends it anyway
        pass

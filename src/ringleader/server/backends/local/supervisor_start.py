"""Starting a run's detached supervisor: ``submit`` and its wait for the first state.
``SupervisorStart`` is mixed into ``LocalBackend`` (the package's ``__init__``), whose
state it uses.

Kept apart from the backend class so that each reads whole: there, the server's
calls on a run that exists (plan, poll, stop, logs, exec); here, the one moment a
run comes to exist: its directory readied, ``launch.json`` written, its cgroups made,
the supervisor spawned in a session of its own and awaited.  Together they were past
the house's 400 lines.

Invariants (the backend's, for a start):
- ``submit`` runs exactly the plan it is given, and refuses a run dir whose
  supervisor is still alive;
- every cgroup of the run (the supervisor's, bounded by ``SUPERVISOR_LIMITS``, and
  each pod's) exists before the supervisor starts, made under the hierarchy's lock
  a stale-cgroup cleaner waits for; the supervisor joins its own before its first
  instruction runs;
- the supervisor's stdio is on files and it leads its own session, so the server
  can stop, restart or die without touching it;
- ``submit`` returns only once the supervisor wrote its first state (so ``poll``
  works at once); a supervisor that does not is killed, its cgroups removed, and
  the error carries the end of its log.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from ringleader.errors import Conflict, RingleaderError
from ringleader.launch.detached import (
    LAUNCH_FILE,
    STATE_FILE,
    SUPERVISOR_LOG,
    detached_argv,
    is_detached_supervisor,
    read_json,
    write_json_atomic,
)
from ringleader.server.backends.local import cgroups as cgroupfs
from ringleader.server.backends.local.cgroups import JOIN_VAR, Hierarchy, join_argv
from ringleader.server.backends.local.homes import prepare_account_dirs
from ringleader.server.backends.local.planning import ENVIRONMENT, LocalPlan
from ringleader.server.backends.local.processes import USAGE_FILE, end_cgroup, tail

#: The supervisor's cgroup (the detached supervisor, its agents, mpirun): root processes
#: that read what ranks write, bounded so that no bug or tenant's file can take the
#: host's memory through them (past it the kernel kills there: the workload fails).
SUPERVISOR_LIMITS = cgroupfs.Limits(memory_bytes=1 << 30)


class SupervisorStart:
    """Submitting a plan: the half of ``LocalBackend`` that starts a run's detached
    supervisor (mixed in; ``LocalBackend.__init__`` sets the state below)."""

    python: str
    start_timeout_s: float
    spawn: Callable[..., subprocess.Popen[bytes]]
    environ: dict[str, str]
    cgroups: Hierarchy | None
    _children: dict[str, subprocess.Popen[bytes]]

    def submit(self, plan: LocalPlan) -> str:
        run_dir = Path(plan.run_dir)
        state = read_json(run_dir / STATE_FILE)
        if state and is_detached_supervisor(state.get("pid"), run_dir):
            raise Conflict(f"a supervisor (pid {state['pid']}) already runs in {run_dir}")
        run_dir.mkdir(parents=True, exist_ok=True)
        if plan.spec.cwd == f"{run_dir}/work":
            Path(plan.spec.cwd).mkdir(exist_ok=True)
        if plan.run_as is not None:
            prepare_account_dirs(plan, plan.run_as)
        (run_dir / STATE_FILE).unlink(missing_ok=True)  # a previous run's, before a resume
        (run_dir / USAGE_FILE).unlink(missing_ok=True)
        write_json_atomic(run_dir / LAUNCH_FILE, plan.launch_file().to_json())
        env = dict(self.environ)
        argv = detached_argv(self.python, run_dir)
        hierarchy = self.cgroups if plan.isolation != ENVIRONMENT else None
        with contextlib.ExitStack() as held:
            if hierarchy is not None:
                # Made (under the shared lock a stale-cgroup cleaner waits for) before
                # the supervisor starts; it joins before its first instruction runs.
                held.enter_context(hierarchy.lock())
                run_id = plan.spec.run_id
                hierarchy.create(f"{run_id}/{cgroupfs.SUPERVISOR}", SUPERVISOR_LIMITS)
                for pod, limits in plan.limits.items():
                    hierarchy.create(f"{run_id}/{pod}", limits)
                    if plan.run_as is not None:  # its ranks join it as the account
                        hierarchy.hand_over(f"{run_id}/{pod}", plan.run_as.uid, plan.run_as.gid)
                env[JOIN_VAR] = " ".join(hierarchy.procs_files(f"{run_id}/{cgroupfs.SUPERVISOR}"))
                argv = join_argv(argv)
            with open(run_dir / SUPERVISOR_LOG, "ab") as log:
                proc = self.spawn(
                    argv,
                    cwd=str(run_dir),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            handle = str(run_dir)
            self._children[handle] = proc
            try:
                self._await_state(run_dir, proc)
            except RingleaderError:
                if hierarchy is not None:
                    end_cgroup(hierarchy, run_dir, plan.spec.run_id)
                raise
        return handle

    def _await_state(self, run_dir: Path, proc: subprocess.Popen[bytes]) -> None:
        """Wait until the supervisor wrote its first state, so poll() works at once."""
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            state = read_json(run_dir / STATE_FILE)
            if state and state.get("pid") == proc.pid:
                return
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        last = tail(run_dir / SUPERVISOR_LOG, 20)
        raise RingleaderError(
            f"the detached supervisor for {run_dir} did not start (exit {proc.returncode})"
            + (f":\n{last}" if last else "")
        )

"""The local backend: each workload is a detached supervisor on this machine.

The package's parts, one job each: ``planning`` (the pure plan: launch spec
and pods), ``status`` (the one state table, ``state.json`` -> our status),
``processes`` (adoption through /proc, the final state of a dead supervisor,
sweeping leftovers, a pod's live process), ``cores`` (cores other runs
hold), ``cgroups`` (the kernel's record of a run's processes: kill,
limits, usage), ``homes`` (a workload's directory in its OS account's
home), ``exec_target`` (where an exec session into a pod runs),
``supervisor_start`` (``submit``: a run's cgroups made, its detached supervisor
spawned and awaited; mixed into ``LocalBackend``).  This module holds the backend
class: it answers the server's calls on a run (plan, poll, stop, logs, exec).

Nomenclature:
- *run dir*: the workload's directory (``BackendRequest.run_dir``); its
  resolved path is the *handle*.  Its files are described in
  ``ringleader.launch.detached``: ``launch.json`` (written here),
  ``state.json`` and ``logs/`` (written by the detached supervisor),
  ``usage.json`` (written here: each pod's measures, read from its cgroup
  before the cgroup is removed).

Invariants:
- the detached supervisor runs in its own session with its stdio on files,
  so the server can stop, restart or die without touching a workload; a new
  ``LocalBackend`` re-adopts a workload from its handle alone;
- ``submit`` runs exactly the plan it is given;
- no orphans: every process of a run is in the run's cgroup (made before
  the supervisor starts; see ``cgroups``), so after its end (noticed by
  ``poll``), a supervisor's death or a ``cancel``, whatever is left of it is
  killed, however it changed its environment or session, and the cgroup is
  removed; where no cgroup can be made (not root, no cgroupfs, macOS) every
  process carrying the job id is swept instead (isolation "environment");
- pods see only the allow-listed part of the server's environment
  (``launch.detached.scoped_environ``) and what the launch sets for them;
- a request with ``run_as`` (``server/accounts.py``) has its ranks and exec
  sessions run as that account, joining only their own pod's cgroup (its
  membership files are handed to the account); the run dir stays the server's.
  A non-root server reaches the account through sudo (``RunAs.sudo``): this
  host's agent, exec sessions, the account's directories and the sweep of a
  run's leftovers go through ``launch/account.py`` as the account, and such a
  run is tracked by environment (no cgroup can be handed to the account).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ringleader.launch.container_runtime import detected as detect_runtime
from ringleader.launch.detached import (
    STATE_FILE,
    LaunchFile,
    is_detached_supervisor,
    load_launch,
    read_json,
    scoped_environ,
)
from ringleader.server import node_kinds
from ringleader.server.backends.base import (
    DEFAULT_IMAGES,
    Backend,
    BackendContext,
    BackendRequest,
    BackendStatus,
    Capabilities,
    ExecTarget,
    ImagePolicy,
    LogLine,
)
from ringleader.server.backends.local.cgroup_versions import detect as detect_cgroups
from ringleader.server.backends.local.cgroups import Hierarchy
from ringleader.server.backends.local.cores import pinned_cores
from ringleader.server.backends.local.exec_target import exec_target
from ringleader.server.backends.local.logtail import run_dir_logs
from ringleader.server.backends.local.planning import (
    ENVIRONMENT,
    LocalPlan,
    LocalPod,
    Where,
    isolation_of,
    plan_launch,
    pods_from_launch,
)
from ringleader.server.backends.local.processes import (
    clean_stale_cgroups,
    died,
    end_cgroup,
    end_containers,
    is_final,
    job_alive,
    run_usage,
    sweep_run,
    with_usage,
    write_final_state,
)
from ringleader.server.backends.local.status import STATES, pod_phase, status_of
from ringleader.server.backends.local.supervisor_start import SUPERVISOR_LIMITS, SupervisorStart
from ringleader.server.images import runs_in_container

__all__ = ["SUPERVISOR_LIMITS", "LocalBackend", "LocalPlan", "LocalPod", "pod_phase"]

DETECT: Any = object()  # LocalBackend(cgroups=DETECT): this host's hierarchy, if any


class LocalBackend(SupervisorStart, Backend[LocalPlan]):
    """Runs each workload as a detached ``ringleader.launch.detached`` here."""

    name: ClassVar[str] = "local"
    capabilities: ClassVar[Capabilities] = Capabilities(
        multi_node=True, suspend=True, exec=True, restarts_in_place=True
    )
    STATES = STATES

    def __init__(
        self,
        *,
        python: str = sys.executable,
        grace_s: float = 5.0,
        start_timeout_s: float = 30.0,
        stop_timeout_s: float | None = None,
        spawn: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen,
        clock: Callable[[], float] = time.time,
        node: str | None = None,
        environ: Mapping[str, str] | None = None,
        max_ranks: int | None = None,
        cgroups: Hierarchy | None = DETECT,
        container_runtime: dict[str, str] | None = DETECT,
        images: ImagePolicy = DEFAULT_IMAGES,
    ) -> None:
        self.python = python
        # What the admin says of image pods: host paths they may mount, pull time.
        self.images = images
        self.grace_s = grace_s
        self.start_timeout_s = start_timeout_s
        # The supervisor stops its gang within about its grace plus agent slack.
        self.stop_timeout_s = stop_timeout_s if stop_timeout_s is not None else grace_s + 15.0
        self.spawn = spawn
        self.clock = clock
        self.node = node or socket.gethostname()
        # Oversubscription is fine for small CPU jobs; thousands of ranks on one box is not.
        self.max_ranks = max_ranks or max(64, 16 * (os.cpu_count() or 1))
        # What supervisors (and so ranks) inherit: the allow-listed part of the
        # server's environment, never its settings or secrets.
        self.environ = scoped_environ(os.environ if environ is None else environ)
        # Where each run's processes are tracked and limited (None: by environment).
        self.cgroups: Hierarchy | None = detect_cgroups() if cgroups is DETECT else cgroups
        self._cleaned: set[Path] = set()  # runs dirs whose stale cgroups were cleaned
        # Pods of a workload with an image run in it (launch/containers.py) where this
        # machine has podman or docker; SSH nodes' agents find their own.
        self.runtime = (
            (detect_runtime() if self.name == "local" else None)
            if container_runtime is DETECT
            else container_runtime
        )
        if self.runtime is not None:
            self.capabilities = dataclasses.replace(self.capabilities, container_images=True)
        self._children: dict[str, subprocess.Popen[bytes]] = {}  # ours to reap
        # The cores pods may be pinned to (this process's own CPU set).
        self.cpus = (
            tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()
        )

    @classmethod
    def configured(cls, context: BackendContext, arg: str = "") -> LocalBackend:
        cls.refuse_arg(arg)
        return cls(python=context.python, images=context.images)

    # ----- plan (pure) -----------------------------------------------------------
    def where(self) -> Where:
        """Every rank on this machine, restarted in place by the supervisor."""
        return Where(
            max_ranks=self.max_ranks, restarts_in_place=self.capabilities.restarts_in_place
        )

    def plan(
        self,
        request: BackendRequest,
        busy_cpus: frozenset[int] = frozenset(),
        cgroups: Hierarchy | None = None,
    ) -> LocalPlan:
        """The launch for ``request`` (pure); ``busy_cpus``: cores other workloads'
        pods are pinned to, so this one's pods pinned to cores of their own;
        ``cgroups``: the hierarchy its pods get cgroups in (None: tracked by env)."""
        return plan_launch(
            request,
            python=self.python,
            grace_s=self.grace_s,
            where=self.where(),
            cpus=self.cpus,
            busy_cpus=busy_cpus,
            cgroups=cgroups,
            runtime=self.runtime if runs_in_container(request.image, self.runtime) else None,
            images=self.images,
        )

    def start(self, request: BackendRequest) -> str:
        """Gather what the plan needs from this machine, plan, submit that plan."""
        run_dir = Path(request.run_dir).resolve()
        self._clean_once(run_dir)
        # Other runs' pinned cores matter only to a pod that will be pinned: scanning
        # every run directory costs a read per run ever made.
        pins = any(
            p.node_kind == node_kinds.LOCAL and p.cpu_cores >= 1
            for p in request.placements.values()
        )
        busy = pinned_cores(run_dir.parent, but=run_dir) if pins else frozenset()
        # Pods get cgroups where every rank runs on this machine (not SSH nodes').
        local = self.where().hosts is None
        # Its account is one of this machine's: ranks on other hosts run as their login.
        run_as = request.run_as if local else None
        # An account reached through sudo cannot be handed cgroup files by a server that
        # is not root, nor its processes signalled: tracked by environment, swept as it.
        tracked = local and (run_as is None or not run_as.sudo)
        request = dataclasses.replace(request, run_dir=str(run_dir), run_as=run_as)
        return self.submit(self.plan(request, busy, self.cgroups if tracked else None))

    # ----- poll ----------------------------------------------------------------------
    def poll(self, handle: str) -> BackendStatus:
        self._reap()
        run_dir = Path(handle).resolve()
        self._clean_once(run_dir)
        launch = load_launch(run_dir)
        state = read_json(run_dir / STATE_FILE)
        if launch is None or state is None:
            return BackendStatus("Unknown", message=f"no launch.json or state.json in {run_dir}")
        if not is_final(state) and not is_detached_supervisor(state.get("pid"), run_dir):
            state = read_json(run_dir / STATE_FILE) or state  # it may have just finished
            if not is_final(state):
                state = self._write_final(run_dir, launch, state, "Failed", died(state))
        cgroup = self.cgroups if isolation_of(launch) != ENVIRONMENT else None
        if is_final(state) and cgroup is not None:  # what ranks left (a daemon) ends too
            end_cgroup(cgroup, run_dir, launch.spec.run_id, pods_from_launch(launch))
        if is_final(state):
            end_containers(launch, cgroup)
        status = status_of(
            state,
            pods_from_launch(launch),
            this_node=self.node,
            phase_of=self.phase_of,
            on_rank0_success=launch.spec.on_rank0_success,
        )
        isolation = isolation_of(launch)
        if launch.spec.container:  # in a container, itself in the pod's cgroup (its limits)
            isolation += f"+{launch.spec.container.get('runtime') or 'podman'}"
        return with_usage(status, run_usage(cgroup, run_dir, launch), isolation)

    # ----- ending a run's processes ----------------------------------------------------
    def end_run(self, run_dir: Path, launch: LaunchFile) -> None:
        """Kill whatever of the run is left: its cgroup (recording each pod's usage, then
        removing it), or the processes carrying its job id where it has none."""
        end_containers(launch, self.cgroups)
        if self.cgroups is not None and isolation_of(launch) != ENVIRONMENT:
            end_cgroup(self.cgroups, run_dir, launch.spec.run_id, pods_from_launch(launch))
        else:
            sweep_run(launch, self.grace_s)

    # ----- cancel (the base class's template: is_live, then stop) ---------------------
    def is_live(self, handle: str) -> bool:
        """A run whose state is not final, or with a process of its job left."""
        run_dir = Path(handle).resolve()
        self._clean_once(run_dir)
        launch = load_launch(run_dir)
        if launch is None:
            return False
        run_id = launch.spec.run_id
        return (
            not is_final(read_json(run_dir / STATE_FILE))
            or (self.cgroups is not None and self.cgroups.exists(run_id))
            or job_alive(launch)
        )

    def stop(self, handle: str) -> None:
        """SIGTERM the supervisor, wait for it, SIGKILL if need be, sweep the rest."""
        run_dir = Path(handle).resolve()
        launch = load_launch(run_dir)
        state = read_json(run_dir / STATE_FILE) or {}
        pid = state.get("pid")
        alive = isinstance(pid, int) and is_detached_supervisor(pid, run_dir)
        reason = died(state)
        if isinstance(pid, int) and alive:
            reason = "stopped by the backend"
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if not self._await_gone(pid, run_dir, self.stop_timeout_s):
                reason = f"the supervisor (pid {pid}) did not stop in time and was killed"
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self._await_gone(pid, run_dir, 5.0)
        self._reap()
        if launch is not None:
            self.end_run(run_dir, launch)
            state = read_json(run_dir / STATE_FILE)
            if state and not is_final(state):
                self._write_final(run_dir, launch, state, "Stopped" if alive else "Failed", reason)

    def _await_gone(self, pid: int, run_dir: Path, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._reap()
            if not is_detached_supervisor(pid, run_dir):
                return True
            time.sleep(0.02)
        return False

    # ----- logs ----------------------------------------------------------------------
    def logs(
        self, handle: str, pod: str | None = None, tail: int | None = None
    ) -> Iterator[LogLine]:
        return run_dir_logs(handle, pod, tail)

    def run_dir_of(self, handle: str) -> Path:
        return Path(handle)  # the handle is the run directory

    # ----- exec ----------------------------------------------------------------------
    def exec_target(self, handle: str, pod: str) -> ExecTarget:
        """Where ``exec``/``bash`` run: the pod's live process's directory and environment."""
        return exec_target(self, handle, pod)

    def reach(self, launch: LaunchFile, pod: LocalPod) -> tuple[str, ...]:
        """The ssh argv (ending with the host) to ``pod``'s node when it is another host's
        (a hook: every local pod is here; the SSH backend's remote ones are not)."""
        return ()

    # ----- helpers -------------------------------------------------------------------
    def _clean_once(self, run_dir: Path) -> None:
        """The first time a runs dir is seen (a server's first poll after a start,
        ``kill -9`` included): clean the run cgroups no process is in, recording
        the measures of those whose run lives in this runs dir."""
        if self.cgroups is not None and run_dir.parent not in self._cleaned:
            self._cleaned.add(run_dir.parent)
            clean_stale_cgroups(self.cgroups, run_dir.parent)

    def _write_final(
        self, run_dir: Path, launch: LaunchFile, state: dict[str, Any], phase: str, reason: str
    ) -> dict[str, Any]:
        return write_final_state(
            run_dir,
            launch,
            state,
            phase,
            reason,
            end=lambda: self.end_run(run_dir, launch),
            clock=self.clock,
        )

    def _reap(self) -> None:
        """Collect our own supervisors' exit statuses so none stays a zombie."""
        for handle, proc in list(self._children.items()):
            if proc.poll() is not None:
                self._children.pop(handle, None)

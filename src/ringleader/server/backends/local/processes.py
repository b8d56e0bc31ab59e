"""A run's processes as /proc shows them: adoption, the final state a dead
supervisor could not write, sweeping leftovers (the sweep itself and finding a
pod's live process live in ``launch/account.py``: a non-root server runs them
as the workloads' account through sudo).

Invariants: the supervisor's pid lives only in ``state.json``, written by the
supervisor itself, and is trusted only while ``/proc/PID/cmdline`` names the
run dir (``is_detached_supervisor``); after a supervisor's death or a stop,
every process of the run is ended (its cgroup, ``LocalBackend.end_run``;
``sweep_run`` by the job id where no cgroup could be made, as the run's
account through sudo when the server cannot signal it), so nothing is
orphaned.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ringleader.errors import RingleaderError
from ringleader.launch import container_cgroups, container_mounts, containers
from ringleader.launch.account import sweep as sweep_job
from ringleader.launch.detached import (
    FINAL_PHASES,
    STATE_FILE,
    LaunchFile,
    load_launch,
    read_json,
    write_json_atomic,
)
from ringleader.launch.procs import job_processes
from ringleader.server.backends.base import BackendStatus
from ringleader.server.backends.local.cgroups import ROOT_VAR, Hierarchy, Usage
from ringleader.server.backends.local.homes import SUDO_TIMEOUT_S, through_sudo
from ringleader.server.backends.local.planning import (
    ENVIRONMENT,
    LocalPod,
    account_run_as,
    pods_from_launch,
)

USAGE_FILE = "usage.json"  # pod -> Usage, read from the pods' cgroups before removal


def sweep_run(launch: LaunchFile, grace_s: float) -> None:
    """SIGTERM, grace, SIGKILL for whatever of the job still runs (agents, ranks): by
    the server itself, or as the run's account through sudo, where the server (not
    root) cannot signal that account's processes nor read their markers."""
    run_as = account_run_as(launch)
    if run_as is None or not run_as.sudo:
        sweep_job(launch.spec.run_id, grace_s)
        return
    args = ("sweep", launch.spec.run_id, str(grace_s))
    done = through_sudo(run_as, launch.spec.python, *args, timeout_s=SUDO_TIMEOUT_S + grace_s)
    if done.returncode != 0:
        raise RingleaderError(
            f"cannot end the processes of {launch.spec.run_id} as {run_as.name}: "
            f"{done.stderr.strip() or done.returncode}"
        )


def job_alive(launch: LaunchFile) -> bool:
    """Whether a process of the job is left (as the run's account sees them, when the
    server cannot read that account's /proc entries itself)."""
    run_id, run_as = launch.spec.run_id, account_run_as(launch)
    if job_processes(run_id):  # its agents are known by their argv, which anyone reads
        return True
    if run_as is None or not run_as.sudo:
        return False
    return through_sudo(run_as, launch.spec.python, "sweep", "--check", run_id).returncode == 0


def end_containers(launch: LaunchFile, hierarchy: Hierarchy | None) -> None:
    """Remove what a run in an image leaves beside its processes: its containers
    (podman's records, stopped or not), the mounts its agents staged, and the empty
    directories podman's ``--cgroup-parent`` made in the cgroup v1 trees ringleader does
    not use (blkio, cpuset, devices ...).  Nothing for a run of processes."""
    container = launch.spec.container
    if not container:
        return
    run_id = launch.spec.run_id
    runtime = str(container.get("runtime") or "podman")
    containers.remove_job(shutil.which(runtime) or runtime, run_id)
    container_mounts.unstage_job(run_id)
    if hierarchy is not None and hierarchy.isolation == "cgroup-v1":
        mount = Path(os.environ.get(ROOT_VAR) or "/sys/fs/cgroup")
        # podman made its path (container_cgroups.cgroup_parent: the memory controller's) in
        # every tree.
        parent = hierarchy.parents.get("memory") or next(iter(hierarchy.parents.values()))
        inside = parent.parts[len(mount.parts) + 1 :]  # below the controller's own tree
        container_cgroups.remove_cgroups("/".join([*inside, run_id]), str(mount))


def end_cgroup(
    hierarchy: Hierarchy, run_dir: Path, run_id: str, pods: Sequence[LocalPod] = ()
) -> None:
    """Kill every process of the run's cgroup, record its pods' usage, remove it."""
    if not hierarchy.exists(run_id):
        return
    if not hierarchy.kill(run_id):
        raise RingleaderError(
            f"processes of cgroup {run_id} survived SIGKILL (stuck in the kernel?)"
        )
    usage = {
        p.name: hierarchy.usage(f"{run_id}/{p.name}").to_json()
        for p in pods
        if hierarchy.exists(f"{run_id}/{p.name}")  # mpirun's pod has none
    }
    if usage:
        write_json_atomic(run_dir / USAGE_FILE, usage)
    hierarchy.remove(run_id)


def clean_stale_cgroups(hierarchy: Hierarchy, runs_dir: Path) -> None:
    """Remove the cgroups of ``runs_dir``'s runs that no process is in: a run that
    ended while no server ran, or one a server killed with -9 made but never
    started (its launch.json is written first; a live run's cgroup is never empty:
    its supervisor is in it; one being made is guarded by the lock), recording
    their measures first, as at their end.  Another server's runs on this host
    share the parent: their cgroups are theirs to clean, measures and all."""
    with hierarchy.lock(exclusive=True):
        for run_id in hierarchy.runs():
            run_dir = runs_dir / run_id.removeprefix("rl-")
            launch = load_launch(run_dir)
            if launch is None or launch.spec.run_id != run_id or hierarchy.pids(run_id):
                continue
            with contextlib.suppress(OSError, RingleaderError):
                end_cgroup(hierarchy, run_dir, run_id, pods_from_launch(launch))
                hierarchy.remove(run_id)


def run_usage(hierarchy: Hierarchy | None, run_dir: Path, launch: LaunchFile) -> dict[str, Usage]:
    """Pod -> what its cgroup measured: live while it exists, else as recorded."""
    run_id = launch.spec.run_id
    if hierarchy is not None and hierarchy.exists(run_id):
        pods = [f"{run_id}/{p.name}" for p in pods_from_launch(launch)]
        return {rel.split("/")[1]: hierarchy.usage(rel) for rel in pods if hierarchy.exists(rel)}
    recorded = read_json(run_dir / USAGE_FILE) or {}
    return {name: Usage.from_json(data) for name, data in recorded.items()}


def with_usage(status: BackendStatus, usage: dict[str, Usage], isolation: str) -> BackendStatus:
    """``status`` with each pod's isolation and measures; a pod the kernel killed at its
    memory limit is named first in a failure's message."""
    pods, oom = [], []
    for pod in status.pods:
        measured = usage.get(pod.name, Usage())
        if measured.oom_kills:
            oom.append(pod.name)
        pods.append(
            dataclasses.replace(
                pod,
                peak_memory_bytes=measured.peak_memory_bytes,
                cpu_seconds=measured.cpu_seconds,
                isolation=isolation or ENVIRONMENT,
            )
        )
    message = status.message
    if oom and status.phase == "Failed":
        message = (
            f"out of memory: the kernel killed a process of pod(s) {', '.join(oom)} "
            f"at its memory limit (cpuMemoryLimit/cpuMemoryRequest)\n{message}"
        )
    return dataclasses.replace(status, pods=pods, message=message)


def write_final_state(
    run_dir: Path,
    launch: LaunchFile,
    state: dict[str, Any],
    phase: str,
    reason: str,
    *,
    end: Callable[[], None],
    clock: Callable[[], float],
) -> dict[str, Any]:
    """The final state a dead (or stopped) supervisor could not write, after
    ``end`` ended its leftovers: ranks still marked Running become Stopped."""
    end()
    for info in (state.get("ranks") or {}).values():
        if info.get("phase") == "Running":
            info["phase"] = "Stopped"
    state = {**state, "phase": phase, "reason": reason, "summary": reason}
    state["updated_at"] = state["ended_at"] = clock()  # its leftovers ended just now
    write_json_atomic(run_dir / STATE_FILE, state)
    return state


def is_final(state: dict[str, Any] | None) -> bool:
    return bool(state) and state.get("phase") in FINAL_PHASES  # type: ignore[union-attr]


def died(state: dict[str, Any]) -> str:
    return (
        f"the workload's supervisor died (pid {state.get('pid')}) before the workload ended; "
        "its remaining processes were stopped"
    )


def tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""

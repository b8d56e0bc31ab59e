"""A run's processes as /proc shows them: adoption, the final state a dead
supervisor could not write, sweeping leftovers, and a pod's live process.

Invariants: the supervisor's pid lives only in ``state.json``, written by the
supervisor itself, and is trusted only while ``/proc/PID/cmdline`` names the
run dir (``is_detached_supervisor``); after a supervisor's death or a stop,
every process of the run is ended (its cgroup, ``LocalBackend.end_run``;
``sweep_job`` by the job id where no cgroup could be made), so nothing is
orphaned.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ringleader.errors import RingleaderError
from ringleader.launch.detached import (
    FINAL_PHASES,
    STATE_FILE,
    LaunchFile,
    job_processes,
    load_launch,
    process_argv,
    read_json,
    write_json_atomic,
)
from ringleader.launch.frameworks import LAUNCHER_RANK
from ringleader.launch.procs import process_environ, start_ticks, terminate
from ringleader.server.backends.base import BackendStatus
from ringleader.server.backends.local.cgroups import Hierarchy, Usage
from ringleader.server.backends.local.planning import ENVIRONMENT, LocalPod, pods_from_launch

MPIRUN_NAMES = ("mpirun", "mpiexec", "orterun", "prterun")
USAGE_FILE = "usage.json"  # pod -> Usage, read from the pods' cgroups before removal


def sweep_job(run_id: str, grace_s: float) -> None:
    """SIGTERM, grace, SIGKILL for whatever of the job still runs (agents, ranks).

    Returns once none is left (a SIGKILLed process takes a moment to go), or
    after a few seconds if one cannot be killed (a process stuck in the kernel).
    """
    pids = job_processes(run_id)
    if not pids:
        return
    terminate(pids, grace_s, marker=f"RINGLEADER_JOB_ID={run_id}")
    deadline = time.monotonic() + 5.0
    while job_processes(run_id) and time.monotonic() < deadline:
        time.sleep(0.02)


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
    """Remove run cgroups no process is in: a run that ended while no server ran, or
    one a server killed with -9 made but never started (a live run's is never
    empty: its supervisor is in it; one being made is guarded by the lock).  The
    measures of a run of ``runs_dir`` are recorded first, as at its end."""
    with hierarchy.lock(exclusive=True):
        for run_id in hierarchy.runs():
            if hierarchy.pids(run_id):
                continue
            run_dir = runs_dir / run_id.removeprefix("rl-")
            launch = load_launch(run_dir)
            with contextlib.suppress(OSError, RingleaderError):
                if launch is not None and launch.spec.run_id == run_id:
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


def pod_process(run_id: str, rank: int) -> tuple[int, dict[str, str]] | None:
    """The oldest live process of the job that is this rank (or the launcher, mpirun), with its env.

    A rank's children (and exec sessions) inherit its environment; the rank
    itself started first.
    """
    found: list[tuple[int, int, dict[str, str]]] = []
    for pid in job_processes(run_id):
        env = process_environ(pid)
        if env is None or env.get("RINGLEADER_JOB_ID") != run_id:
            continue  # an agent (named by argv) rather than a rank
        if rank == LAUNCHER_RANK:
            argv = process_argv(pid) or [b""]
            if os.path.basename(argv[0].decode(errors="replace")) not in MPIRUN_NAMES:
                continue
        elif str(rank) not in (env.get("RANK"), env.get("OMPI_COMM_WORLD_RANK")):
            continue
        ticks = start_ticks(pid)
        if ticks is not None:
            found.append((ticks, pid, env))
    if not found:
        return None
    _, pid, env = min(found, key=lambda item: item[:2])
    return pid, env


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

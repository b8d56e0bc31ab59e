"""The local backend: each workload is a detached supervisor on this machine.

It is also the SSH backend: when the scheduler bound pods to registered SSH
nodes, the supervisor's launch has those nodes as its hosts
(``gang_hosts``), so the launcher's agents start there over SSH and their
output comes back here; restarts then go back to the server's scheduler
(``BackendStatus.server_restarts``) so a lost node is not tried again.

Nomenclature:
- *run dir*: the workload's directory (``BackendRequest.run_dir``); its
  resolved path is the *handle*.  Its files are described in
  ``ringleader.launch.detached``: ``launch.json`` (written here),
  ``state.json`` and ``logs/`` (written by the detached supervisor).
- *pod mapping*: Run:ai's pods over the launcher's ranks.  PyTorch: the
  master pod (``NAME-master-0``) is rank 0 and ``numWorkers`` worker pods
  (``NAME-worker-I``) are ranks 1..N, one rank each.  MPI: the launcher pod
  (``NAME-launcher``) runs mpirun (pseudo-rank -1) and worker pod I holds
  ranks ``I*slots .. I*slots+slots-1`` (``slotsPerWorker``, default 1).

Invariants:
- the detached supervisor runs in its own session with its stdio on files,
  so the server can stop, restart or die without touching a workload; a new
  ``LocalBackend`` re-adopts a workload from its handle alone;
- the pid lives only in ``state.json``, written by the supervisor itself, and
  is trusted only while ``/proc/PID/cmdline`` names this run dir;
- no orphans: after a supervisor's death (noticed by ``poll``) or a
  ``cancel``, every process carrying the job id is swept.
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
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ringleader.errors import Conflict, InvalidSpec, NotFound, RingleaderError
from ringleader.hosts import Host
from ringleader.launch.detached import (
    FINAL_PHASES,
    LAUNCH_FILE,
    STATE_FILE,
    SUPERVISOR_LOG,
    LaunchFile,
    detached_argv,
    is_detached_supervisor,
    job_processes,
    load_launch,
    process_argv,
    read_json,
    read_logs,
    write_json_atomic,
)
from ringleader.launch.hold import hold_argv
from ringleader.launch.mpi import MPIRUN
from ringleader.launch.options import resolve_command
from ringleader.launch.plan import LaunchSpec
from ringleader.launch.procs import process_environ, start_ticks, terminate
from ringleader.runtime.checkpoint import CHECKPOINT_DIR
from ringleader.runtime.env import CPU_AFFINITY
from ringleader.server.backends.base import (
    BackendRequest,
    BackendStatus,
    Capabilities,
    ExecTarget,
    LogLine,
    PodPlacement,
    PodStatus,
)
from ringleader.server.backends.pod_env import assign_cores, pod_env
from ringleader.spec import RUNNABLE_FRAMEWORKS, Framework

# The detached supervisor's phase -> ours.  Anything else is Unknown.
PHASES = {
    "Starting": "Initializing",
    "Running": "Running",
    "Restarting": "Running",
    "Stopping": "Running",
    "Succeeded": "Completed",
    "Failed": "Failed",
    "Stopped": "Stopped",
}
# cleanPodPolicy -> what the supervisor does with ranks still running when the
# master (rank 0) completes.  Processes that ended hold nothing and their logs
# are kept, so All and Running differ only on engines that delete pods.
ON_RANK0_SUCCESS = {"Running": "stop-rest", "All": "stop-rest", "None": "leave-rest"}
# The server's secrets; its other settings (RINGLEADER_HOME, _URL) are plain paths and
# addresses that let a rank's own `ringleader` calls reach the same server.
SERVER_ONLY = frozenset(
    {"RINGLEADER_DATABASE_URL", "RINGLEADER_CLIENT_ID", "RINGLEADER_CLIENT_SECRET"}
)
MPIRUN_NAMES = ("mpirun", "mpiexec", "orterun", "prterun")
MESSAGES = {
    "Starting": "starting the supervisor and its agent",
    "Restarting": "restarting the gang after a failure",
    "Stopping": "stopping the gang",
}


@dataclass(frozen=True)
class LocalPod:
    name: str
    role: str  # master | worker | launcher
    index: int
    ranks: tuple[int, ...]  # -1: mpirun itself
    node: str = ""  # the scheduler's node ("" before the scheduler: this machine)


@dataclass(frozen=True)
class LocalPlan:
    """The native request: a launch on this machine and its pods."""

    spec: LaunchSpec
    framework: str  # the launcher's: "pytorch" | "mpi"
    pods: tuple[LocalPod, ...]
    run_dir: str
    attempt_offset: int = 0

    def launch_file(self) -> LaunchFile:
        pods = [dataclasses.asdict(p) | {"ranks": list(p.ranks)} for p in self.pods]
        return LaunchFile(spec=self.spec, attempt_offset=self.attempt_offset, pods=pods)


def pods_from_launch(launch: LaunchFile) -> list[LocalPod]:
    return [
        LocalPod(p["name"], p["role"], int(p["index"]), tuple(p["ranks"]), str(p.get("node") or ""))
        for p in launch.pods
    ]


def pod_phase(rank_phases: list[str]) -> str:
    """A pod fails with any rank, runs while any runs, succeeds when all did."""
    if not rank_phases:
        return "Pending"
    for phase in ("Failed", "Running"):
        if phase in rank_phases:
            return phase
    if all(p == "Succeeded" for p in rank_phases):
        return "Succeeded"
    return "Stopped" if "Stopped" in rank_phases else "Unknown"


def pod_exit_code(ranks: list[dict[str, Any]]) -> int | None:
    """The failed rank's code, else the first non-zero one, else 0 (None: none ended)."""
    codes = [r["exit_code"] for r in ranks if r.get("exit_code") is not None]
    failed = [r["exit_code"] for r in ranks if r.get("phase") == "Failed"]
    return (failed or [c for c in codes if c] or codes or [None])[0]


class LocalBackend:
    """Runs each workload as a detached ``ringleader.launch.detached`` here."""

    name = "local"
    capabilities = Capabilities(
        multi_node=True, gpu_isolation=False, suspend=True, container_images=False
    )

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
    ) -> None:
        self.python = python
        self.grace_s = grace_s
        self.start_timeout_s = start_timeout_s
        # The supervisor stops its gang within about its grace plus agent slack.
        self.stop_timeout_s = stop_timeout_s if stop_timeout_s is not None else grace_s + 15.0
        self.spawn = spawn
        self.clock = clock
        self.node = node or socket.gethostname()
        # Oversubscription is fine for small CPU jobs; thousands of ranks on one box is not.
        self.max_ranks = max_ranks or max(64, 16 * (os.cpu_count() or 1))
        # What supervisors (and so ranks) inherit: the server's environment without
        # its own settings and secrets (database URL with its password, API keys).
        self.environ = {
            k: v
            for k, v in (os.environ if environ is None else environ).items()
            if k not in SERVER_ONLY
        }
        self._children: dict[str, subprocess.Popen[bytes]] = {}  # ours to reap
        # The cores pods may be pinned to (this process's own CPU set).
        self.cpus = (
            tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()
        )

    # ----- plan (pure) -----------------------------------------------------------
    def plan(self, request: BackendRequest, busy_cpus: frozenset[int] = frozenset()) -> LocalPlan:
        """The launch for ``request`` (pure); ``busy_cpus``: cores other workloads'
        pods are pinned to, so this one's pods pinned to cores of their own."""
        spec, dist = request.spec, request.spec.spec
        if spec.framework not in RUNNABLE_FRAMEWORKS:
            raise InvalidSpec(
                f"the local backend runs PyTorch and MPI workloads, not {spec.framework.value}",
                "spec.distributedFramework",
            )
        master = spec.master()
        argv = master.argv()
        if not argv and not dist.interactive:
            raise InvalidSpec(
                "no command given: set command (and args), or submit an interactive workload",
                "spec.command",
            )
        command = resolve_command(argv, self.python) if argv else []
        if dist.interactive:  # pods outlive their command, for bash/exec
            command = hold_argv(self.python, command)
        workers = dist.num_workers
        world_size = workers * (dist.slots_per_worker or 1) + (spec.framework != Framework.MPI)
        remote = any(p.node_kind == "ssh" for p in request.placements.values())
        if world_size > self.max_ranks and not remote:
            raise InvalidSpec(
                f"{world_size} ranks do not fit on this machine: the local backend runs at most "
                f"{self.max_ranks} ({os.cpu_count()} CPU cores)",
                "spec.numWorkers",
            )
        run_dir = request.run_dir.rstrip("/") or "/"
        env = {
            **master.env(),
            "RINGLEADER_WORKLOAD_ID": request.workload_id,
            "RINGLEADER_WORKLOAD_NAME": request.name,
            "RINGLEADER_PROJECT": request.project,
            "RUNAI_MPI_NUM_WORKERS": str(workers),
        }
        # Survives restarts, preemptions and resumes: the run dir is kept (runtime.checkpoint).
        env.setdefault(CHECKPOINT_DIR, f"{run_dir}/checkpoints")
        layout = spec.pod_layout(request.name)
        if spec.framework == Framework.MPI:
            framework, slots = "mpi", dist.slots_per_worker or 1
            world = workers * slots
            ranks = [(MPIRUN,), *(tuple(range(i * slots, (i + 1) * slots)) for i in range(workers))]
        else:
            framework, world = "pytorch", workers + 1
            ranks = [(rank,) for rank in range(world)]
        pods = [
            LocalPod(n, role, i, r, request.placements[n].node if n in request.placements else "")
            for (n, role, i), r in zip(layout, ranks, strict=True)
        ]
        cores = assign_cores(
            {
                name: where.cpu_cores
                for name, where in request.placements.items()
                if where.node_kind == "local"
            },
            self.cpus,
            busy_cpus,
        )
        rank_env = {
            str(rank): pod_env(request.placements[pod.name], env, cores.get(pod.name, ()))
            for pod in pods
            if pod.name in request.placements
            for rank in pod.ranks
            if rank >= 0
        }
        launch = LaunchSpec(
            command=command,
            hosts=gang_hosts(pods, request.placements)
            if remote
            else [Host("localhost", "127.0.0.1", world)],
            run_id=f"rl-{request.workload_id}",
            cwd=master.working_dir or dist.working_dir or f"{run_dir}/work",
            python=self.python,
            framework=framework,
            # On SSH nodes a restart goes back to the scheduler (see server_restarts).
            max_restarts=0 if remote else max(0, dist.backoff_limit - request.attempt_offset),
            grace_s=self.grace_s,
            env=env,
            rank_env=rank_env,
            on_rank0_success=ON_RANK0_SUCCESS[dist.clean_pod_policy]
            if framework == "pytorch"
            else "wait",  # mpirun (the launcher pod) only ends after every rank
        )
        return LocalPlan(launch, framework, tuple(pods), run_dir, request.attempt_offset)

    # ----- submit --------------------------------------------------------------------
    def submit(self, request: BackendRequest) -> str:
        run_dir = Path(request.run_dir).resolve()
        # Other runs' pinned cores matter only to a pod that will be pinned: scanning
        # every run directory costs a read per run ever made.
        pins = any(p.node_kind == "local" and p.cpu_cores >= 1 for p in request.placements.values())
        busy = pinned_cores(run_dir.parent, but=run_dir) if pins else frozenset()
        plan = self.plan(dataclasses.replace(request, run_dir=str(run_dir)), busy)
        state = read_json(run_dir / STATE_FILE)
        if state and is_detached_supervisor(state.get("pid"), run_dir):
            raise Conflict(f"a supervisor (pid {state['pid']}) already runs in {run_dir}")
        run_dir.mkdir(parents=True, exist_ok=True)
        if plan.spec.cwd == f"{run_dir}/work":
            Path(plan.spec.cwd).mkdir(exist_ok=True)
        (run_dir / STATE_FILE).unlink(missing_ok=True)  # a previous run's, before a resume
        write_json_atomic(run_dir / LAUNCH_FILE, plan.launch_file().to_json())
        env = {k: v for k, v in self.environ.items() if not k.startswith("RINGLEADER_JOB")}
        with open(run_dir / SUPERVISOR_LOG, "ab") as log:
            proc = self.spawn(
                detached_argv(self.python, run_dir),
                cwd=str(run_dir),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        handle = str(run_dir)
        self._children[handle] = proc
        self._await_state(run_dir, proc)
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
        tail = _tail(run_dir / SUPERVISOR_LOG, 20)
        raise RingleaderError(
            f"the detached supervisor for {run_dir} did not start (exit {proc.returncode})"
            + (f":\n{tail}" if tail else "")
        )

    # ----- poll ----------------------------------------------------------------------
    def poll(self, handle: str) -> BackendStatus:
        self._reap()
        run_dir = Path(handle).resolve()
        launch = load_launch(run_dir)
        state = read_json(run_dir / STATE_FILE)
        if launch is None or state is None:
            return BackendStatus("Unknown", message=f"no launch.json or state.json in {run_dir}")
        if state.get("phase") not in FINAL_PHASES and not is_detached_supervisor(
            state.get("pid"), run_dir
        ):
            state = read_json(run_dir / STATE_FILE) or state  # it may have just finished
            if state.get("phase") not in FINAL_PHASES:
                state = self._bury(run_dir, launch, state, "Failed", _died(state))
        remote = any(not h.is_local for h in launch.spec.hosts)
        return self._status(state, pods_from_launch(launch), launch.spec.on_rank0_success, remote)

    def _status(
        self,
        state: dict[str, Any],
        pods: list[LocalPod],
        on_rank0_success: str = "wait",
        remote: bool = False,
    ) -> BackendStatus:
        native = str(state.get("phase"))
        attempt = int(state.get("attempt") or 0)
        ranks: dict[str, dict[str, Any]] = state.get("ranks") or {}
        pod_states = []
        for pod in pods:
            infos = [ranks[str(r)] for r in pod.ranks if str(r) in ranks]
            phase = pod_phase([str(i.get("phase")) for i in infos])
            pod_states.append(
                PodStatus(
                    name=pod.name,
                    role=pod.role,
                    index=pod.index,
                    phase=phase,
                    node=pod.node or self.node,
                    exit_code=None if phase == "Running" else pod_exit_code(infos),
                    attempt=attempt,
                    ranks=tuple(r for r in pod.ranks if r >= 0),
                )
            )
        message = state.get("reason") or MESSAGES.get(native, "")
        summary = state.get("summary")
        if native == "Failed" and summary and summary != message:
            message = f"{message}\n{summary}"  # one line first, the root-cause text below it
        if native == "Restarting":
            message = f"{message} (attempt {attempt + 1} next)"
        phase = PHASES.get(native, "Unknown")
        master = (ranks.get("0") or {}).get("phase")
        if phase == "Running" and on_rank0_success == "leave-rest" and master == "Succeeded":
            running = [p.name for p in pod_states if p.phase == "Running"]
            phase = "Completed"  # the master's success is the job's; the rest run on
            message = (
                f"the master completed; {len(running)} pod(s) left running by cleanPodPolicy "
                f"None until they end or the workload is deleted: {', '.join(running)}"
            )
        return BackendStatus(
            phase=phase,
            message=message,
            attempt=attempt,
            pods=pod_states,
            exit_code=state.get("exit_code"),
            server_restarts=remote,
        )

    # ----- cancel --------------------------------------------------------------------
    def cancel(self, handle: str) -> None:
        """SIGTERM the supervisor, wait for it, SIGKILL if need be, sweep the rest."""
        run_dir = Path(handle).resolve()
        launch = load_launch(run_dir)
        state = read_json(run_dir / STATE_FILE) or {}
        pid = state.get("pid")
        alive = isinstance(pid, int) and is_detached_supervisor(pid, run_dir)
        reason = _died(state)
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
            job_processes_gone(launch.spec.run_id, self.grace_s)
            state = read_json(run_dir / STATE_FILE)
            if state and state.get("phase") not in FINAL_PHASES:
                self._bury(run_dir, launch, state, "Stopped" if alive else "Failed", reason)

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
        run_dir = Path(handle).resolve()
        launch = load_launch(run_dir)
        if launch is None:
            raise NotFound("workload run", handle)
        owner = {r: p.name for p in pods_from_launch(launch) for r in p.ranks}
        if pod is not None and pod not in owner.values():
            raise NotFound("pod", pod)
        ranks = None if pod is None else {r for r, name in owner.items() if name == pod}
        lines = (
            LogLine(owner.get(r.rank, f"rank-{r.rank}"), r.attempt, r.stream, r.text, r.time)
            for r in read_logs(run_dir / launch.log_dir, ranks)
        )
        return iter(deque(lines, maxlen=tail)) if tail is not None else lines

    # ----- exec ----------------------------------------------------------------------
    def exec_target(self, handle: str, pod: str) -> ExecTarget:
        """Where ``exec``/``bash`` run: the pod's live process's directory and environment."""
        run_dir = Path(handle).resolve()
        launch = load_launch(run_dir)
        if launch is None:
            raise NotFound("workload run", handle)
        pods = {p.name: p for p in pods_from_launch(launch)}
        if pod not in pods:
            raise NotFound("pod", pod)
        remote = {h.name for h in launch.spec.hosts if not h.is_local}
        if _ssh_host(launch, pods[pod]) in remote:
            raise Conflict(
                f"pod {pod} runs on SSH node {pods[pod].node}: exec into pods on SSH nodes is "
                f"not supported yet; log in there (ssh {pods[pod].node}) and cd {launch.spec.cwd}"
            )
        found = pod_process(launch.spec.run_id, pods[pod].ranks[0])
        if found is None:
            raise Conflict(
                f"pod {pod} has no running process to exec into (its command has ended); "
                "submit with --interactive to keep pods up after their command"
            )
        pid, env = found
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = launch.spec.cwd
        return ExecTarget(node=self.node, cwd=cwd, env=env)

    # ----- helpers -------------------------------------------------------------------
    def _bury(
        self, run_dir: Path, launch: LaunchFile, state: dict[str, Any], phase: str, reason: str
    ) -> dict[str, Any]:
        """The final state a dead supervisor could not write; its leftovers swept first."""
        job_processes_gone(launch.spec.run_id, self.grace_s)
        for info in (state.get("ranks") or {}).values():
            if info.get("phase") == "Running":
                info["phase"] = "Stopped"
        state = {**state, "phase": phase, "reason": reason, "summary": reason}
        state["updated_at"] = self.clock()
        write_json_atomic(run_dir / STATE_FILE, state)
        return state

    def _reap(self) -> None:
        """Collect our own supervisors' exit statuses so none stays a zombie."""
        for handle, proc in list(self._children.items()):
            if proc.poll() is not None:
                self._children.pop(handle, None)


def gang_hosts(pods: list[LocalPod], placements: Mapping[str, PodPlacement]) -> list[Host]:
    """The launch's hosts for a gang placed on SSH nodes: each pod's node in rank
    order, consecutive pods on one node as one host with their ranks as slots.

    A pod on this machine's own node (local or simulated) runs here; the
    supervisor then gives the others this machine's address toward them.
    """
    hosts: list[Host] = []
    for pod in pods:
        ranks = [r for r in pod.ranks if r >= 0]
        if not ranks:
            continue  # mpirun itself (the MPI launcher pod) runs here
        where = placements.get(pod.name)
        if where is not None and where.node_kind == "ssh":
            host = Host(where.ssh or where.node, where.address or where.node, len(ranks))
        else:
            host = Host("localhost", "127.0.0.1", len(ranks))
        if hosts and (hosts[-1].ssh, hosts[-1].address) == (host.ssh, host.address):
            host = Host(host.ssh, host.address, hosts.pop().slots + host.slots)
        hosts.append(host)
    return hosts


def job_processes_gone(run_id: str, grace_s: float) -> None:
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


def pod_process(run_id: str, rank: int) -> tuple[int, dict[str, str]] | None:
    """The oldest live process of the job that is this rank (or mpirun), with its env.

    A rank's children (and exec sessions) inherit its environment; the rank
    itself started first.
    """
    found: list[tuple[int, int, dict[str, str]]] = []
    for pid in job_processes(run_id):
        env = process_environ(pid)
        if env is None or env.get("RINGLEADER_JOB_ID") != run_id:
            continue  # an agent (named by argv) rather than a rank
        if rank == MPIRUN:
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


def _ssh_host(launch: LaunchFile, pod: LocalPod) -> str:
    """The launch host that runs ``pod``'s first rank ("" for mpirun)."""
    rank = pod.ranks[0]
    for host in launch.spec.hosts:
        if 0 <= rank < host.slots:
            return host.name
        rank -= host.slots
    return ""


def _died(state: dict[str, Any]) -> str:
    return (
        f"the workload's supervisor died (pid {state.get('pid')}) before the workload ended; "
        "its remaining processes were stopped"
    )


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def pinned_cores(runs_dir: Path, but: Path) -> frozenset[int]:
    """Cores that the pods of other live runs under ``runs_dir`` are pinned to."""
    busy: set[int] = set()
    for run in runs_dir.glob("*"):
        if run == but:
            continue
        state = read_json(run / STATE_FILE)
        launch = load_launch(run) if state and state.get("phase") not in FINAL_PHASES else None
        if launch is None or not is_detached_supervisor(state.get("pid"), run):
            continue
        for env in launch.spec.rank_env.values():
            cores = env.get(CPU_AFFINITY, "")
            busy.update(int(c) for c in cores.split(",") if c.isdigit())
    return frozenset(busy)

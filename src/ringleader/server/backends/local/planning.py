"""The local backend's plan (pure): a workload's launch on this machine and its pods.

Nomenclature:
- *pod mapping*: Run:ai's pods over the launcher's ranks.  PyTorch: the
  master pod (``NAME-master-0``) is rank 0 and ``numWorkers`` worker pods
  (``NAME-worker-I``) are ranks 1..N, one rank each.  MPI: the launcher pod
  (``NAME-launcher``) runs mpirun (pseudo-rank -1) and worker pod I holds
  ranks ``I*slots .. I*slots+slots-1`` (``slotsPerWorker``, default 1).
  Both come from the framework's registry entry (``launch.frameworks``);
- *where*: the launch's hosts for the pods (``Where``): this machine for the
  local backend, the SSH nodes' login targets for the SSH backend.

- *isolation*: how a pod's processes are tracked: ``cgroup-v1``/``cgroup-v2``
  (the pod's ranks join ``<run id>/<pod name>`` under the backend's cgroup
  parent before their command runs, through ``cgroups.join_argv``; its
  compute as Kubernetes enforces it: ``cpuMemoryLimit`` and ``cpuCoreLimit``
  hard, ``cpuMemoryRequest`` and ``cpuCoreRequest`` as shares, see
  ``cgroups.Limits``: a request is not a cap, so Run:ai's walkthrough body,
  which asks for 100M for a PyTorch run, still runs), or
  ``environment`` (no cgroup could be made here: the job's marker only).
  MPI's launcher pod is mpirun, a child of the agent: it stays in the run's
  ``supervisor`` cgroup, so it is killed with the run but not measured.

Invariant: ``plan_launch`` reads nothing and writes nothing; what it needs
from the world (cores other runs hold, this machine's CPU set, its cgroup
hierarchy) is passed in.

What an image's pods get (``LaunchSpec.container``) is planned in ``container_plan``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ringleader.errors import InvalidSpec
from ringleader.hosts import Host
from ringleader.launch import frameworks
from ringleader.launch.detached import LaunchFile
from ringleader.launch.keepalive import keepalive_argv
from ringleader.launch.options import resolve_command
from ringleader.launch.plan import LaunchSpec
from ringleader.runtime.checkpoint import CHECKPOINT_DIR
from ringleader.runtime.metrics import METRICS_DIR
from ringleader.server import node_kinds
from ringleader.server.backends.base import DEFAULT_IMAGES, BackendRequest, ImagePolicy, RunAs
from ringleader.server.backends.local.container_plan import container_of, own_mounts
from ringleader.server.backends.pod_env import assign_cores, launcher_env, pod_env
from ringleader.spec import Compute, WorkloadSpec
from ringleader.spec_limits import parse_quantity

if TYPE_CHECKING:
    from ringleader.server.backends.local.cgroups import Hierarchy, Limits

ENVIRONMENT = "environment"  # isolation without a cgroup: the job's env marker

# cleanPodPolicy -> what the supervisor does with ranks still running when the
# master (rank 0) completes.  Processes that ended hold nothing and their logs
# are kept, so All and Running differ only on engines that delete pods.
ON_RANK0_SUCCESS = {"Running": "stop-rest", "All": "stop-rest", "None": "leave-rest"}


@dataclass(frozen=True)
class LocalPod:
    name: str
    role: str  # master | worker | launcher
    index: int
    ranks: tuple[int, ...]  # -1: mpirun itself
    node: str = ""  # the scheduler's node ("" before the scheduler: this machine)


@dataclass(frozen=True)
class LocalPlan:
    """The native request: a launch (here or over SSH) and its pods."""

    spec: LaunchSpec
    framework: str  # the launcher's: "pytorch" | "mpi"
    pods: tuple[LocalPod, ...]
    run_dir: str
    attempt_offset: int = 0
    isolation: str = ENVIRONMENT  # "cgroup-v1" | "cgroup-v2" | "environment"
    limits: dict[str, Limits] = field(default_factory=dict)  # pod -> its cgroup's, if it has one
    run_as: RunAs | None = None  # the account ranks run as (None: the supervisor's)

    def launch_file(self) -> LaunchFile:
        pods = [dataclasses.asdict(p) | {"ranks": list(p.ranks)} for p in self.pods]
        if self.isolation != ENVIRONMENT:  # read back by poll, stop and describe
            pods = [p | {"isolation": self.isolation} for p in pods]
        run_as = dataclasses.asdict(self.run_as) if self.run_as is not None else None
        if run_as is not None and not run_as["sudo"]:  # switched to by the server (root)
            del run_as["sudo"]
        return LaunchFile(
            spec=self.spec, attempt_offset=self.attempt_offset, pods=pods, run_as=run_as
        )


def account_dir(run_as: RunAs, workload_id: str) -> str:
    """The workload's own directory in its account's home (checkpoints, default cwd):
    the run dir stays the server's (root, 0700), so ranks write here instead."""
    return f"{run_as.home.rstrip('/')}/ringleader/{workload_id}"


def account_run_as(launch: LaunchFile) -> RunAs | None:
    """The account a planned run's ranks run as, read back from its launch.json."""
    found = launch.run_as
    if not found:
        return None
    return RunAs(
        str(found["name"]),
        int(found["uid"]),
        int(found["gid"]),
        str(found["home"]),
        str(found.get("sudo") or ""),
    )


def pods_from_launch(launch: LaunchFile) -> list[LocalPod]:
    return [
        LocalPod(p["name"], p["role"], int(p["index"]), tuple(p["ranks"]), str(p.get("node") or ""))
        for p in launch.pods
    ]


def isolation_of(launch: LaunchFile) -> str:
    """How the run's processes are tracked, as planned."""
    found = {str(p.get("isolation") or ENVIRONMENT) for p in launch.pods}
    return found.pop() if len(found) == 1 else ENVIRONMENT


def pod_limits(compute: Compute) -> Limits:
    """What a pod's cgroup enforces of its compute (limits hard, requests as shares)."""
    from ringleader.server.backends.local.cgroups import Limits

    def size(text: str | None) -> int | None:
        return parse_quantity(text) if text else None

    return Limits(
        memory_bytes=size(compute.cpu_memory_limit),
        cpu_cores=compute.cpu_core_limit,
        memory_request_bytes=size(compute.cpu_memory_request),
        cpu_request_cores=compute.cpu_core_request,
    )


def ranks_by_node(pods: list[LocalPod]) -> list[LocalPod]:
    """The pods with ranks renumbered so that pods on one node hold consecutive ranks
    (nodes in order of their first pod; the launcher keeps its pseudo-rank).

    mpirun fills its hostfile's machines in order, one line per machine, so
    ranks must be grouped by machine for each rank to run where its pod (its
    devices, its cgroup) was placed: a spread placement alternates nodes.
    """
    ranked = [p for p in pods if min(p.ranks) >= 0]
    first_seen = {node: i for i, node in reversed(list(enumerate(p.node for p in ranked)))}
    renumbered: dict[str, tuple[int, ...]] = {}
    next_rank = 0
    for pod in sorted(ranked, key=lambda p: first_seen[p.node]):  # stable: pod order kept
        renumbered[pod.name] = tuple(range(next_rank, next_rank + len(pod.ranks)))
        next_rank += len(pod.ranks)
    return [dataclasses.replace(p, ranks=renumbered.get(p.name, p.ranks)) for p in pods]


@dataclass(frozen=True)
class Where:
    """Where a gang's ranks run, as the backend decides it.

    ``hosts``: the launch's hosts for the pods, given the request; ``None``
    means one host, this machine, with every rank.  ``restarts_in_place``:
    False when a failed attempt goes back to the server's scheduler.
    ``max_ranks``: the most ranks the hosts can take (None: no limit here).
    """

    hosts: Callable[[list[LocalPod], BackendRequest], list[Host]] | None = None
    restarts_in_place: bool = True
    max_ranks: int | None = None


def _framework(spec: WorkloadSpec) -> frameworks.Framework:
    """The launcher's framework the spec names; 422 naming the field when none runs here."""
    framework = spec.registered_framework
    if framework is None:
        runnable = " and ".join(f.spec_name for f in frameworks.all_frameworks() if f.spec_name)
        raise InvalidSpec(
            f"the local backend runs {runnable} workloads, not {spec.framework.value}",
            "spec.distributedFramework",
        )
    return framework


def _command(argv: list[str], interactive: bool, python: str) -> list[str]:
    """What the ranks run; an interactive pod outlives its command (for bash/exec)."""
    if not argv and not interactive:
        raise InvalidSpec(
            "no command given: set command (and args), or submit an interactive workload",
            "spec.command",
        )
    command = resolve_command(argv, python) if argv else []
    return keepalive_argv(python, command) if interactive else command


def workload_env(
    request: BackendRequest, spec_env: dict[str, str], workers: int, own_dir: str
) -> dict[str, str]:
    """Every rank's environment before its place in the gang: the spec's, ringleader's
    and Run:ai's names (docs/backends.md, "Pod environment"), the run's directories, and the
    account's identity (set last: never the spec's)."""
    env = {
        **spec_env,
        "RINGLEADER_WORKLOAD_ID": request.workload_id,
        "RINGLEADER_WORKLOAD_NAME": request.name,
        "RINGLEADER_PROJECT": request.project,
        # JOB_* are generic: a spec's own win.
        "RUNAI_JOB_NAME": request.name,
        "RUNAI_PROJECT": request.project,
        "RUNAI_MPI_NUM_WORKERS": str(workers),
        **request.pod_env,
    }
    env.setdefault("JOB_NAME", request.name)
    env.setdefault("JOB_UUID", request.workload_id)
    env.setdefault(CHECKPOINT_DIR, f"{own_dir}/checkpoints")
    # runtime.report's records (read by services.metrics): always ours, never the spec's.
    env[METRICS_DIR] = f"{own_dir}/metrics"
    run_as = request.run_as
    if run_as is not None:
        env.update(HOME=run_as.home, USER=run_as.name, LOGNAME=run_as.name)
        if not run_as.sudo:  # a root agent gives each pod a /tmp of its own (launch/podns)
            env.setdefault("TMPDIR", "/tmp")
    return env


def _into_cgroups(
    pods: list[LocalPod],
    cgroups: Hierarchy,
    run_id: str,
    rank_env: dict[str, dict[str, str]],
    worker_compute: Compute,
    master_compute: Compute,
) -> dict[str, Limits]:
    """Each pod's limits from its compute, and each rank told which cgroup to join
    (``rank_env`` changed in place); mpirun's pod has none: it stays with the
    supervisor."""
    from ringleader.server.backends.local.cgroups import JOIN_VAR

    limits: dict[str, Limits] = {}
    for pod in pods:
        if any(rank >= 0 for rank in pod.ranks):
            compute = worker_compute if pod.role == "worker" else master_compute
            limits[pod.name] = pod_limits(compute)
        join = " ".join(cgroups.procs_files(f"{run_id}/{pod.name}"))
        for rank in (r for r in pod.ranks if r >= 0):
            rank_env[str(rank)] = {**rank_env.get(str(rank), {}), JOIN_VAR: join}
    return limits


def plan_launch(
    request: BackendRequest,
    *,
    python: str,
    grace_s: float,
    where: Where,
    cpus: Sequence[int] = (),
    busy_cpus: frozenset[int] = frozenset(),
    cgroups: Hierarchy | None = None,
    runtime: dict[str, str] | None = None,
    images: ImagePolicy = DEFAULT_IMAGES,
) -> LocalPlan:
    """The launch for ``request``: pure.  ``cpus``: this machine's cores pods on its
    own node may be pinned to; ``busy_cpus``: those other runs' pods hold;
    ``cgroups``: this machine's hierarchy, when each pod gets a cgroup; ``runtime``:
    its container runtime, when an image's pods run in the image; ``images``:
    the admin's policy for image pods (host paths, pull time)."""
    spec, dist = request.spec, request.spec.spec
    framework = _framework(spec)
    master = spec.master()
    in_image = bool(request.image and runtime is not None)
    # In an image, ``python`` is the image's own, and no command at all runs its default.
    command = master.argv() if in_image else _command(master.argv(), dist.interactive, python)
    workers = dist.num_workers
    world = framework.world_size(workers, dist.slots_per_worker)
    if where.max_ranks is not None and world > where.max_ranks:
        raise InvalidSpec(
            f"{world} ranks do not fit on this machine: the local backend runs at most "
            f"{where.max_ranks} ({os.cpu_count()} CPU cores)",
            "spec.numWorkers",
        )
    run_dir = request.run_dir.rstrip("/") or "/"
    run_as = request.run_as
    # Survives restarts, preemptions and resumes: the run dir is kept (runtime.checkpoint).
    # A workload running as its account gets a directory of its own in the account's home.
    own_dir = account_dir(run_as, request.workload_id) if run_as is not None else run_dir
    env = workload_env(request, master.env(), workers, own_dir)
    layout = spec.pod_layout(request.name)
    ranks = framework.pod_ranks(workers, dist.slots_per_worker)
    placements = request.placements
    pods = [
        LocalPod(n, role, i, r, placements[n].node if n in placements else "")
        for (n, role, i), r in zip(layout, ranks, strict=True)
    ]
    if framework.uses_slots:  # mpirun's hostfile has one line per machine: see ranks_by_node
        pods = ranks_by_node(pods)
    local = {name: p.cpu_cores for name, p in placements.items() if p.node_kind == node_kinds.LOCAL}
    cores = assign_cores(local, tuple(cpus), busy_cpus)
    rank_env = {
        str(rank): pod_env(pod.name, placements[pod.name], env, cores.get(pod.name, ()))
        if rank >= 0
        else launcher_env(pod.name, placements[pod.name], env)  # mpirun's (launch.mpi)
        for pod in pods
        if pod.name in placements
        for rank in pod.ranks
    }
    run_id = f"rl-{request.workload_id}"
    limits: dict[str, Limits] = {}
    if cgroups is not None:
        from ringleader.server.backends.local.cgroups import join_argv

        command = join_argv(command)
        limits = _into_cgroups(pods, cgroups, run_id, rank_env, dist.compute, master.compute)
    hosts = (
        where.hosts(sorted(pods, key=lambda p: p.ranks[0]), request)
        if where.hosts is not None
        else [Host("localhost", "127.0.0.1", world)]
    )
    launch = LaunchSpec(
        command=command,
        hosts=hosts,
        run_id=run_id,
        cwd=master.working_dir or dist.working_dir or f"{own_dir}/work",
        python=python,
        framework=framework.name,
        max_restarts=max(0, dist.backoff_limit - request.attempt_offset)
        if where.restarts_in_place
        else 0,
        grace_s=grace_s,
        env=env,
        rank_env=rank_env,
        # A non-root server's account: this host's agent is started as it, through sudo.
        sudo=run_as.sudo if run_as is not None else "",
        sudo_user=run_as.name if run_as is not None and run_as.sudo else "",
        # A master is rank 0, whose success is the job's; a launcher (mpirun) only
        # ends after every rank, so there is nothing to decide for the rest.
        on_rank0_success=ON_RANK0_SUCCESS[dist.clean_pod_policy]
        if framework.layout.head_runs_ranks
        else "wait",
        container=container_of(request, runtime, python, own_mounts(own_dir, run_as), images),
    )
    return LocalPlan(
        launch,
        framework.name,
        tuple(pods),
        run_dir,
        request.attempt_offset,
        isolation=cgroups.isolation if cgroups is not None else ENVIRONMENT,
        limits=limits,
        run_as=run_as,
    )

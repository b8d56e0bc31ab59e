"""The Slurm backend: a node pool is a Slurm partition, a workload one sbatch job.

``ringleader server --backend slurm:PARTITION[,account=A][,account.PROJECT=A][,time=T][@POOL]``

The package's parts: ``planning`` (settings and the pure plan: the sbatch
request and the launch the job runs), ``status`` (Slurm's record and the
supervisor's as one status); this module does the I/O through
``ringleader.slurm.commands`` (the only runner of Slurm's commands).

Nomenclature:
- *handle*: ``JOBID:RUN_DIR``: the Slurm job id (what ``describe`` shows), and
  the run directory its supervisor writes, so a restarted server re-adopts the
  job from the handle alone and reads its logs after Slurm forgot it;
- *run dir*: as the local backend's (``launch.json``, ``state.json``, ``logs/``,
  ``supervisor.log`` = the job's own output); it must be on a filesystem the
  server and the partition's nodes share;
- *inventory*: the partition's nodes (``scontrol show node``) as nodes of kind
  ``slurm`` in the backend's pools, re-read by the server every little while.

Who decides what: ringleader's scheduler admits a workload against its
project's quotas, fair share and the pool's whole capacity, and binds no node
(``server/engine_pools.py``); Slurm places the job; its pods show the nodes
Slurm gave it once it runs.

Invariants: jobs are submitted with a scoped environment (what a detached
supervisor may get, plus ``SLURM_CONF``), never the server's own; ``cancel`` is
idempotent; a poll that cannot reach Slurm reports Unknown, never an end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ringleader.errors import InvalidSpec, RingleaderError
from ringleader.launch.container_runtime import detected as detect_runtime
from ringleader.launch.detached import (
    LAUNCH_FILE,
    STATE_FILE,
    SUPERVISOR_LOG,
    load_launch,
    read_json,
    scoped_environ,
    write_json_atomic,
)
from ringleader.sched import DEFAULT_POOL
from ringleader.server.backends.base import (
    DEFAULT_IMAGES,
    Backend,
    BackendContext,
    BackendRequest,
    BackendStatus,
    Capabilities,
    ImagePolicy,
    LogLine,
)
from ringleader.server.backends.local.homes import prepare_account_dirs
from ringleader.server.backends.local.logtail import run_dir_logs
from ringleader.server.backends.local.planning import pods_from_launch
from ringleader.server.backends.local.processes import tail
from ringleader.server.backends.slurm.planning import SlurmPlan, SlurmSettings, plan_job
from ringleader.server.backends.slurm.status import job_status
from ringleader.server.images import runs_in_container
from ringleader.server.inventory import NodeDecl
from ringleader.slurm import commands
from ringleader.slurm.commands import SlurmError
from ringleader.slurm.nodes import SlurmNode, partition_nodes
from ringleader.slurm.states import JOB_PHASES
from ringleader.spec import WorkloadSpec

__all__ = ["SlurmBackend", "SlurmSettings"]

NODES_MAX_AGE_S = 10.0  # how old the partition's node list may be for a submit's check
# Slurm's own settings that the job's clients (srun inside it) need, beside the scoped env.
SLURM_ENV = ("SLURM_CONF",)


def split_handle(handle: str) -> tuple[str, Path]:
    """``JOBID:RUN_DIR`` -> (job id, run dir)."""
    job_id, sep, run_dir = handle.partition(":")
    if not sep or not commands.is_job_id(job_id):
        raise RingleaderError(f"not a Slurm backend handle (JOBID:RUN_DIR): {handle!r}")
    return job_id, Path(run_dir)


class SlurmBackend(Backend[SlurmPlan]):
    """Each workload is one sbatch job whose first node runs its detached supervisor."""

    name: ClassVar[str] = "slurm"
    capabilities: ClassVar[Capabilities] = Capabilities(
        multi_node=True,
        gpu_isolation=True,  # Slurm binds each job's GPUs (gres)
        suspend=True,  # scancel, then a new job from the last checkpoint
        exec=False,
        restarts_in_place=True,  # the supervisor restarts the gang inside the allocation
        engine_nodes=True,  # the partition's nodes; Slurm places the job
    )
    STATES = JOB_PHASES

    def __init__(
        self,
        settings: SlurmSettings,
        *,
        pools: tuple[str, ...] = (DEFAULT_POOL,),
        python: str = sys.executable,
        grace_s: float = 5.0,
        stop_timeout_s: float | None = None,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        poll_interval_s: float = 1.0,
        container_runtime: dict[str, str] | None = None,
        images: ImagePolicy = DEFAULT_IMAGES,
    ) -> None:
        self.settings = settings
        # Image pods run as ``podman run`` inside the job step on each node (the
        # runtime found here; each node's agent finds its own), with the admin's policy.
        self.runtime = container_runtime
        self.images = images
        if container_runtime is not None:
            self.capabilities = dataclasses.replace(self.capabilities, container_images=True)
        self.pools = pools or (DEFAULT_POOL,)
        self.python = python
        self.grace_s = grace_s
        self.stop_timeout_s = stop_timeout_s if stop_timeout_s is not None else grace_s + 15.0
        source = os.environ if environ is None else environ
        # What sbatch (so the job, --export=ALL) gets: never the server's settings or secrets.
        self.environ = scoped_environ(source) | {k: source[k] for k in SLURM_ENV if k in source}
        self.clock = clock
        self._nodes: list[SlurmNode] = []
        self._nodes_at = -1e9
        self._jobs: dict[str, tuple[float, commands.JobInfo | None]] = {}  # id -> (when, info)
        self.poll_interval_s = poll_interval_s
        self._lock = threading.Lock()

    @classmethod
    def configured(cls, context: BackendContext, arg: str = "") -> SlurmBackend:
        """From ``--backend slurm:ARG``: refuses (naming ``--backend``) a partition Slurm
        does not have, or a Slurm it cannot reach, before the server starts."""
        backend = cls(
            SlurmSettings.parse(arg),
            pools=tuple(context.pools),
            python=context.python,
            container_runtime=detect_runtime(),
            images=context.images,
        )
        backend.check_partition()
        return backend

    def check_partition(self) -> None:
        partition = self.settings.partition
        try:
            known = commands.partitions()
        except SlurmError as exc:
            raise InvalidSpec(f"slurm:{partition}: cannot ask Slurm: {exc}", "--backend") from None
        if partition not in known:
            raise InvalidSpec(
                f"slurm:{partition}: Slurm has no partition {partition!r} "
                f"(it has {', '.join(known) or 'none'})",
                "--backend",
            )
        self.nodes(max_age_s=0)

    # ----- the partition's nodes ---------------------------------------------------------
    def nodes(self, max_age_s: float = NODES_MAX_AGE_S) -> list[SlurmNode]:
        """The partition's nodes, read again when older than ``max_age_s``."""
        with self._lock:
            if self.clock() - self._nodes_at <= max_age_s:
                return self._nodes
        found = partition_nodes(self.settings.partition)
        with self._lock:
            self._nodes, self._nodes_at = found, self.clock()
        return found

    def inventory(self) -> list[NodeDecl]:
        """The partition's nodes as ``slurm`` nodes of the backend's first pool."""
        return [
            NodeDecl(
                name=node.name,
                kind="slurm",
                cpu_cores=float(node.cpus),
                memory_bytes=node.memory_mb * 2**20,
                gpus=tuple(gpu_entry(i, node.gpu_model) for i in range(node.gpus)),
                pool=self.pools[0],
                labels={"slurm.partition": self.settings.partition},
                address=node.address or node.name,
                message=node.message,
                ready=node.ready,
            )
            for node in self.nodes(max_age_s=0)
        ]

    def check_fits(self, spec: WorkloadSpec) -> None:
        from ringleader.server.backends.slurm.planning import check_fits

        check_fits(spec, self.settings.partition, self.nodes())

    # ----- plan, submit ------------------------------------------------------------------
    def plan(self, request: BackendRequest) -> SlurmPlan:
        in_image = runs_in_container(request.image, self.runtime)
        return plan_job(
            request,
            self.settings,
            self.nodes(),
            python=self.python,
            grace_s=self.grace_s,
            runtime=self.runtime if in_image else None,
            images=self.images,
        )

    def start(self, request: BackendRequest) -> str:
        run_dir = str(Path(request.run_dir).resolve())
        return self.submit(self.plan(_with_run_dir(request, run_dir)))

    def submit(self, plan: SlurmPlan) -> str:
        run_dir = Path(plan.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        if plan.launch.spec.cwd == f"{run_dir}/work":
            Path(plan.launch.spec.cwd).mkdir(exist_ok=True)
        if plan.run_as is not None:
            prepare_account_dirs(plan.launch, plan.run_as)  # type: ignore[arg-type]
        (run_dir / STATE_FILE).unlink(missing_ok=True)  # a previous run's, before a resume
        write_json_atomic(run_dir / LAUNCH_FILE, plan.launch.to_json())
        job_id = commands.submit(plan.script, env=self.environ)
        return f"{job_id}:{run_dir}"

    @classmethod
    def describe_handle(cls, handle: str) -> str:
        job_id, _, _ = handle.partition(":")
        return f"Slurm job {job_id}"

    # ----- poll ----------------------------------------------------------------------
    def poll(self, handle: str) -> BackendStatus:
        job_id, run_dir = split_handle(handle)
        try:
            job = self._job_info(job_id)
        except SlurmError as exc:
            return BackendStatus("Unknown", message=f"cannot ask Slurm about job {job_id}: {exc}")
        launch = load_launch(run_dir)
        if launch is None:
            return BackendStatus("Unknown", message=f"no launch.json in {run_dir}")
        return job_status(
            job_id,
            job,
            read_json(run_dir / STATE_FILE),
            pods_from_launch(launch),
            on_rank0_success=launch.spec.on_rank0_success,
            log_tail=tail(run_dir / SUPERVISOR_LOG, 20),
        )

    def _job_info(self, job_id: str) -> commands.JobInfo | None:
        """``scontrol show job``, at most once per ``poll_interval_s`` per job: the server
        polls every running workload several times a second, slurmctld need not answer
        each (the supervisor's own record, a file, is read every time)."""
        now = self.clock()
        with self._lock:
            seen = self._jobs.get(job_id)
            if seen is not None and now - seen[0] < self.poll_interval_s:
                return seen[1]
        job = commands.job_info(job_id)
        with self._lock:
            if len(self._jobs) > 10_000:
                self._jobs.clear()
            self._jobs[job_id] = (now, job)
        return job

    # ----- cancel (the base class's template: is_live, then stop) ---------------------
    def is_live(self, handle: str) -> bool:
        job_id, _ = split_handle(handle)
        try:
            job = commands.job_info(job_id)
        except SlurmError:
            return True  # in doubt: stop() makes sure
        return job is not None and not job.state.ended

    def stop(self, handle: str) -> None:
        """Ask the supervisor (the batch step) to stop the gang with its grace, so ranks
        get SIGTERM and the run records Stopped; then cancel the job for good."""
        job_id, _ = split_handle(handle)
        try:
            job = commands.job_info(job_id)
        except SlurmError:
            job = None  # in doubt: cancel it outright
        if job is not None and not job.state.waiting and not job.state.ended:
            with contextlib.suppress(SlurmError):  # it ended meanwhile: cancelled below
                commands.run_slurm(["scancel", "--batch", "--signal=TERM", job_id])
            deadline = time.monotonic() + self.stop_timeout_s
            while time.monotonic() < deadline:
                with contextlib.suppress(SlurmError):
                    job = commands.job_info(job_id)
                    if job is None or job.state.ended:
                        return
                time.sleep(0.2)
        commands.cancel(job_id)

    # ----- logs ----------------------------------------------------------------------
    def logs(
        self, handle: str, pod: str | None = None, tail: int | None = None
    ) -> Iterator[LogLine]:
        return run_dir_logs(str(self.run_dir_of(handle)), pod, tail)

    def run_dir_of(self, handle: str) -> Path:
        return split_handle(handle)[1]  # JOBID:RUN_DIR, the run dir on shared storage


def gpu_entry(index: int, model: str) -> dict[str, Any]:
    """A node's GPU as the nodes table keeps it (Slurm does not say its memory)."""
    return {"index": index, "memoryBytes": 0, **({"model": model} if model else {})}


def _with_run_dir(request: BackendRequest, run_dir: str) -> BackendRequest:
    import dataclasses

    return dataclasses.replace(request, run_dir=run_dir)

"""The Slurm backend's plan (pure): a workload -> one sbatch job that runs its gang.

Nomenclature:
- *settings*: what ``--backend slurm:ARG`` says (``SlurmSettings``): the
  partition, the account each project's jobs are charged to, a default time limit;
- *shape*: what one node of the job must hold: the largest pod's CPUs,
  memory and GPUs (``NodeShape``); Slurm gives every node of a job the same;
- *pod mapping*: one pod per node, in pod order (the master, rank 0, on the
  job's first node); a pod's ranks are the node's tasks (``--ntasks-per-node``);
- *placeholder hosts*: the launch's hosts before Slurm has placed the job
  (``slurm-node-I``); the job replaces them with its allocation's nodes
  (``ringleader.launch.slurm_job``), so agents start there as srun steps.

What maps to what: ``cpuCoreRequest`` (else ``cpuCoreLimit``) -> ``--cpus-per-task``
(per rank, rounded up); ``cpuMemoryLimit`` (else ``cpuMemoryRequest``) ->
``--mem`` per node (Slurm enforces what it reserves, so the limit is reserved);
``gpuDevicesRequest`` -> ``--gpus-per-node`` (whole devices: Slurm sets
CUDA_VISIBLE_DEVICES itself); the project -> ``--account`` (settings).

Invariants: ``plan_job`` and ``check_fits`` read nothing and write nothing (what
they need from Slurm, the partition's nodes, is passed in); every refusal is an
``InvalidSpec`` naming the field, raised before anything is submitted.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ringleader.errors import InvalidSpec
from ringleader.hosts import Host
from ringleader.launch.detached import SUPERVISOR_LOG, LaunchFile
from ringleader.runtime.env import POD_GPUS
from ringleader.server.backends.base import (
    DEFAULT_IMAGES,
    BackendRequest,
    ImagePolicy,
    PodPlacement,
    RunAs,
)
from ringleader.server.backends.local.planning import LocalPod, Where, plan_launch
from ringleader.slurm.nodes import SlurmNode
from ringleader.slurm.sbatch import SbatchRequest, render_script, validate_time
from ringleader.spec import Compute, WorkloadSpec
from ringleader.spec_limits import parse_quantity

JOB_MODULE = "ringleader.launch.slurm_job"
PLACEHOLDER = "slurm-node-"
MIB = 2**20
# What the scheduler's binding says that Slurm decides instead (its devices, its order).
_SLURM_DECIDES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


@dataclass(frozen=True)
class SlurmSettings:
    """``--backend slurm:PARTITION[,account=ACCOUNT][,account.PROJECT=ACCOUNT][,time=LIMIT]``."""

    partition: str
    accounts: Mapping[str, str] = field(default_factory=dict)  # project -> account; "*": others
    time: str | None = None

    @classmethod
    def parse(cls, arg: str) -> SlurmSettings:
        """The settings in ``arg``; InvalidSpec naming ``--backend`` and the bad part."""
        partition, *options = [part.strip() for part in arg.split(",")]
        if not partition:
            raise InvalidSpec(
                "slurm:PARTITION[,account=ACCOUNT][,account.PROJECT=ACCOUNT][,time=LIMIT]: "
                "name the partition (sinfo -s lists them)",
                "--backend",
            )
        _check_name(partition, "the partition")
        accounts: dict[str, str] = {}
        time = None
        for option in options:
            key, sep, value = option.partition("=")
            if not sep or not value:
                raise InvalidSpec(f"slurm:{arg}: {option!r} is not KEY=VALUE", "--backend")
            if key == "time":
                try:
                    time = validate_time(value)
                except ValueError as exc:
                    raise InvalidSpec(f"slurm:{arg}: {exc}", "--backend") from None
            elif key == "account" or key.startswith("account."):
                project = key.removeprefix("account").removeprefix(".") or "*"
                accounts[project] = _check_name(value, f"the account for {project}")
            else:
                raise InvalidSpec(
                    f"slurm:{arg}: unknown option {key!r} (account, account.PROJECT, time)",
                    "--backend",
                )
        return cls(partition, accounts, time)

    def account_for(self, project: str) -> str | None:
        """The account ``project``'s jobs are charged to (None: Slurm's default)."""
        return self.accounts.get(project) or self.accounts.get("*")


def _check_name(value: str, what: str) -> str:
    if not _NAME.fullmatch(value):
        raise InvalidSpec(f"{what} {value!r}: letters, digits, '_', '.' and '-'", "--backend")
    return value


@dataclass(frozen=True)
class NodeShape:
    """What each node of the job holds for its one pod (its ranks' tasks)."""

    ranks: int
    cpus: float  # the pod's cores (0: Slurm's default, one per task)
    memory_bytes: int  # 0: Slurm's default (DefMemPerCPU)
    gpus: int


def pod_computes(spec: WorkloadSpec) -> list[tuple[str, Compute]]:
    """(field prefix, compute) of each kind of pod: the master's, then the workers'."""
    found = [("spec.compute", spec.spec.compute)]
    master = spec.master()
    if master.compute is not spec.spec.compute:
        found.insert(0, ("masterSpec.compute", master.compute))
    return found


def gpu_devices(compute: Compute) -> int:
    """Whole GPUs a pod asks for (a portion of 1 is one device)."""
    if compute.gpu_portion_request == 1:
        return max(compute.gpu_devices_request or 0, 1)
    return compute.gpu_devices_request or 0


def pod_needs(compute: Compute) -> list[tuple[int, str, str, str]]:
    """What a node must have for one pod: (amount, SlurmNode attribute, field, words)."""
    cores = compute.cpu_core_request or compute.cpu_core_limit or 0
    memory = compute.cpu_memory_limit or compute.cpu_memory_request
    return [
        (gpu_devices(compute), "gpus", "gpuDevicesRequest", "GPUs"),
        (math.ceil(cores), "cpus",
         "cpuCoreRequest" if compute.cpu_core_request else "cpuCoreLimit", "CPUs"),
        (math.ceil(parse_quantity(memory) / MIB) if memory else 0, "memory_mb",
         "cpuMemoryLimit" if compute.cpu_memory_limit else "cpuMemoryRequest", "MiB of memory"),
    ]  # fmt: skip


def node_shape(spec: WorkloadSpec) -> NodeShape:
    """The largest pod's needs, which every node of the job gets."""
    dist, framework = spec.spec, spec.registered_framework
    pods = framework.pod_ranks(dist.num_workers, dist.slots_per_worker) if framework else []
    computes = [c for _, c in pod_computes(spec)]
    memory = [c.cpu_memory_limit or c.cpu_memory_request for c in computes]
    return NodeShape(
        ranks=max((len([r for r in pod if r >= 0]) for pod in pods), default=1),
        cpus=max(c.cpu_core_request or c.cpu_core_limit or 0.0 for c in computes),
        memory_bytes=max(parse_quantity(m) if m else 0 for m in memory),
        gpus=max(gpu_devices(c) for c in computes),
    )


def check_fits(spec: WorkloadSpec, partition: str, nodes: Sequence[SlurmNode]) -> None:
    """Refuse, naming the field, what the partition's nodes could never run."""
    framework = spec.registered_framework
    if framework is None or (framework.layout.head_role and not framework.layout.head_runs_ranks):
        raise InvalidSpec(
            "the slurm backend runs workloads whose pods are all ranks (PyTorch: a master "
            f"and workers, one pod per node), not {spec.framework.value}",
            "spec.distributedFramework",
        )
    ranks = framework.pod_ranks(spec.spec.num_workers, spec.spec.slots_per_worker)
    if len({len(pod) for pod in ranks}) > 1:
        raise InvalidSpec(
            "every pod of a Slurm job runs the same number of ranks", "spec.slotsPerWorker"
        )
    for prefix, compute in pod_computes(spec):
        fraction = compute.gpu_portion_request is not None and compute.gpu_portion_request < 1
        if fraction or compute.gpu_memory_request is not None:
            name = "gpuPortionRequest" if fraction else "gpuMemoryRequest"
            raise InvalidSpec(
                "Slurm allocates whole GPUs: ask for gpuDevicesRequest instead of a fraction",
                f"{prefix}.{name}",
            )
    pods = len(ranks)
    if pods > len(nodes):
        raise InvalidSpec(
            f"{pods} pods need {pods} nodes (one pod per node) but partition {partition} has "
            f"{len(nodes)}",
            "spec.numWorkers",
        )
    for prefix, compute in pod_computes(spec):
        for need, have, name, words in pod_needs(compute):
            fit = sum(1 for n in nodes if getattr(n, have) >= need)
            if fit >= pods:
                continue
            most = max(getattr(n, have) for n in nodes)
            if have == "gpus" and not most:
                problem = f"partition {partition} has no GPUs"
            else:
                problem = (
                    f"{fit} of its nodes have that many and {pods} are needed "
                    f"(the most one has: {most})"
                )
            raise InvalidSpec(
                f"each pod asks for {need} {words}, but in partition {partition} {problem}"
                if have != "gpus" or most
                else f"each pod asks for {need} {words}, but {problem}",
                f"{prefix}.{name}",
            )


@dataclass(frozen=True)
class SlurmPlan:
    """The native request: the batch script, and the launch the job runs."""

    sbatch: SbatchRequest
    script: str
    launch: LaunchFile  # launch.json: placeholder hosts until the job fills them in
    pods: tuple[LocalPod, ...]
    run_dir: str
    run_as: RunAs | None = None


def placeholder_hosts(pods: list[LocalPod], request: BackendRequest) -> list[Host]:
    """One host per pod that runs ranks (its ranks as slots), in rank order."""
    ranked = [p for p in pods if any(r >= 0 for r in p.ranks)]
    return [
        Host(f"{PLACEHOLDER}{i}", f"{PLACEHOLDER}{i}", len(p.ranks)) for i, p in enumerate(ranked)
    ]


def plan_job(
    request: BackendRequest,
    settings: SlurmSettings,
    nodes: Sequence[SlurmNode],
    *,
    python: str,
    grace_s: float,
    runtime: dict[str, str] | None = None,
    images: ImagePolicy = DEFAULT_IMAGES,
) -> SlurmPlan:
    """The sbatch job for ``request`` (pure); ``nodes``: the partition's, for ``check_fits``;
    ``runtime``: when its image's pods run in the image (``podman run`` in the job step)."""
    spec = request.spec
    check_fits(spec, settings.partition, nodes)
    shape = node_shape(spec)
    # Slurm decides where and which devices: the binding keeps only what the pod asked.
    placements = {
        name: PodPlacement(node=p.node, node_kind=p.node_kind, cpu_cores=p.cpu_cores)
        for name, p in request.placements.items()
    }
    for name, role, _ in spec.pod_layout(request.name):
        compute = spec.spec.compute if role == "worker" else spec.master().compute
        placements.setdefault(
            name, PodPlacement(node="", node_kind="slurm", cpu_cores=compute.cpu_core_request or 0)
        )
    local = plan_launch(
        dataclasses.replace(request, placements=placements),
        python=python,
        grace_s=grace_s,
        where=Where(hosts=placeholder_hosts, restarts_in_place=True),
        runtime=runtime,
        images=images,
    )
    rank_env = {
        rank: {k: v for k, v in env.items() if k not in _SLURM_DECIDES}
        | {"RUNAI_NUM_OF_GPUS": str(shape.gpus), POD_GPUS: str(shape.gpus)}
        for rank, env in local.spec.rank_env.items()
    }
    launch_spec = dataclasses.replace(local.spec, rank_env=rank_env)
    run_dir = local.run_dir
    sbatch = SbatchRequest(
        job_name=f"rl-{request.name}"[:128],
        nodes=len(local.spec.hosts),
        ntasks_per_node=shape.ranks,
        cpus_per_task=math.ceil(shape.cpus / shape.ranks) if shape.cpus else None,
        mem_per_node_mb=math.ceil(shape.memory_bytes / MIB) if shape.memory_bytes else None,
        gpus_per_node=shape.gpus or None,
        partition=settings.partition,
        time=settings.time,
        account=settings.account_for(request.project),
        output=f"{run_dir}/{SUPERVISOR_LOG}",
        chdir=run_dir,
        extra_args=(
            "--open-mode=append",  # a resubmission (resume) adds to the same log
            f"--comment=ringleader:{request.project}/{request.workload_id}",
        ),
        requeue=True,  # a preemption requeues it rather than ending it; the backend resubmits
        command=(python, "-m", JOB_MODULE, run_dir),
    )
    plan = dataclasses.replace(local, spec=launch_spec)
    return SlurmPlan(
        sbatch=sbatch,
        script=render_script(sbatch),
        launch=plan.launch_file(),
        pods=local.pods,
        run_dir=run_dir,
        run_as=local.run_as,
    )

"""Readers for the schedulers' own names: OpenMPI, Slurm, Kubeflow PyTorchJob (torch-free).

Each ``from_*`` turns one scheduler's environment into a :class:`RankEnv`, filling
what the scheduler does not say (rendezvous address and port) the way every rank
of the job will fill it alike.  :func:`ringleader.runtime.env.detect` decides
which reader applies and validates the result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ringleader.runtime.nodelist import expand_nodelist, expand_tasks_per_node
from ringleader.runtime.rankenv import (
    DEFAULT_PORT,
    LOOPBACK,
    EnvError,
    RankEnv,
    first_set,
    port_from_job_id,
    read_int,
    read_port,
)

__all__ = ["from_kubeflow", "from_openmpi", "from_slurm"]


def from_openmpi(environ: Mapping[str, str]) -> RankEnv:
    """mpirun's names; MASTER_ADDR must be exported (``-x``) unless all ranks share a node.

    The port, when not given, comes from the MPI job id so all ranks agree on it.
    """
    # OMPI_COMM_WORLD_NODE_RANK is, despite its name, a per-node process index
    # (across all jobs on the node), so it only stands in for a missing local rank;
    # the node index is inferred from the default by-slot mapping.
    rank = read_int(environ, "OMPI_COMM_WORLD_RANK")
    world = read_int(environ, "OMPI_COMM_WORLD_SIZE")
    local_rank = read_int(
        environ, "OMPI_COMM_WORLD_LOCAL_RANK", read_int(environ, "OMPI_COMM_WORLD_NODE_RANK", 0)
    )
    local_world = read_int(environ, "OMPI_COMM_WORLD_LOCAL_SIZE", 1)
    addr = environ.get("MASTER_ADDR") or None
    if addr is None and local_world >= world:
        addr = LOOPBACK  # every rank is on this node
    port = read_port(environ)
    if port is None:
        job = first_set(
            environ, "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "OMPI_MCA_orte_hnp_uri"
        )
        port = port_from_job_id(job) if job else DEFAULT_PORT
    return RankEnv(
        source="openmpi",
        rank=rank,
        local_rank=local_rank,
        world_size=world,
        local_world_size=local_world,
        node_rank=rank // max(local_world, 1),
        nnodes=max(1, -(-world // max(local_world, 1))),
        master_addr=addr,
        master_port=port,
    )


def _slurm_local_world(environ: Mapping[str, str], node_id: int) -> int:
    """Tasks on this node; SLURM_TASKS_PER_NODE may be uneven (``3(x2),1``)."""
    if environ.get("SLURM_NTASKS_PER_NODE"):
        return read_int(environ, "SLURM_NTASKS_PER_NODE")
    spec = first_set(environ, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
    if not spec:
        return 1
    try:
        counts = expand_tasks_per_node(spec)
    except ValueError as exc:
        raise EnvError(f"SLURM_TASKS_PER_NODE={spec!r}: {exc}") from None
    return counts[min(node_id, len(counts) - 1)]


def from_slurm(environ: Mapping[str, str]) -> RankEnv:
    """srun's names; rendezvous on the first host of the node list, port from the job id."""
    node_id = read_int(environ, "SLURM_NODEID", 0)
    world = read_int(environ, "SLURM_NTASKS", read_int(environ, "SLURM_NPROCS", 1))
    # The step's node list, when set, is the one whose first host runs rank 0.
    nodelist = first_set(environ, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
    hosts: list[str] = []
    if nodelist:
        try:
            hosts = expand_nodelist(nodelist)
        except ValueError as exc:
            raise EnvError(f"Slurm node list {nodelist!r}: {exc}") from None
    addr = environ.get("MASTER_ADDR") or (hosts[0] if hosts else None)
    port = read_port(environ)
    if port is None and environ.get("SLURM_JOB_ID"):
        port = port_from_job_id(environ["SLURM_JOB_ID"])
    return RankEnv(
        source="slurm",
        rank=read_int(environ, "SLURM_PROCID"),
        local_rank=read_int(environ, "SLURM_LOCALID", 0),
        world_size=world,
        local_world_size=_slurm_local_world(environ, node_id),
        node_rank=node_id,
        nnodes=read_int(
            environ, "SLURM_NNODES", read_int(environ, "SLURM_JOB_NUM_NODES", len(hosts) or 1)
        ),
        master_addr=addr,
        master_port=port,
    )


def from_kubeflow(environ: Mapping[str, str]) -> RankEnv:
    """A PyTorchJob pod's names (also any RANK/WORLD_SIZE env:// setup without LOCAL_RANK)."""
    # PyTorchJob gives one process per pod: RANK is the pod index and WORLD_SIZE is
    # pods * PET_NPROC_PER_NODE.  With more than one process per pod, torchrun must
    # run in the pod to spawn them; a bare process would wait for ranks never started.
    nproc_raw = environ.get("PET_NPROC_PER_NODE", "1").strip()
    nproc = int(nproc_raw) if re.fullmatch(r"\d+", nproc_raw) else 1
    if nproc > 1:
        raise EnvError(
            f"PET_NPROC_PER_NODE={nproc} but this process was not started by torchrun "
            "(no LOCAL_RANK): run `torchrun` or `ringleader` inside the pod"
        )
    node_rank = read_int(environ, "PET_NODE_RANK", read_int(environ, "RANK", 0))
    rank = read_int(environ, "RANK", node_rank)
    nnodes_raw = environ.get("PET_NNODES", "").strip()
    nnodes = int(nnodes_raw) if nnodes_raw.isdigit() else None
    world = read_int(environ, "WORLD_SIZE", nnodes)
    return RankEnv(
        source="kubeflow",
        rank=rank,
        world_size=world,
        node_rank=node_rank,
        nnodes=nnodes or world,
        master_addr=first_set(environ, "MASTER_ADDR", "PET_MASTER_ADDR"),
        master_port=read_port(environ) or read_port(environ, "PET_MASTER_PORT"),
    )

"""Work out this process's place in the world from its environment (torch-free).

Nomenclature
    rank              index of this process in the whole job, ``0 <= rank < world_size``.
    local_rank        index of this process among the ranks on its node.
    world_size        number of ranks in the job.
    local_world_size  number of ranks on this node.
    node_rank         index of this node, ``0 <= node_rank < nnodes``.
    source            which launcher's names were read: ``ringleader``, ``torchrun``,
                      ``openmpi``, ``slurm``, ``kubeflow`` or ``none``.

Sources are tried in that order, first match wins.  The order matters: torchrun
inside ``srun`` and ``mpirun`` inside an ``sbatch`` script both inherit Slurm's
names from the batch step (where ``SLURM_PROCID`` is 0 for everybody), so the
launcher closest to the process must win.

Invariants of a :class:`RankEnv` returned by :func:`detect`: the ranks are in range,
and ``master_addr``/``master_port`` are set whenever ``world_size > 1``.  With no
launcher at all the answer is a world of one, unless a world size above one is
expected, because then every process would silently train alone (split brain).

Everything here takes a plain mapping so it can be tested without touching
``os.environ``; :func:`export_defaults` is the only function that writes.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from ringleader.runtime.env_readers import from_kubeflow, from_openmpi, from_slurm
from ringleader.runtime.rankenv import (
    PORT_BASE,
    PORT_SPAN,
    EnvError,
    NoLauncherEnvironment,
    RankEnv,
    first_set,
    port_from_job_id,
    read_int,
    read_port,
)

__all__ = [
    "PORT_BASE",
    "PORT_SPAN",
    "EnvError",
    "NoLauncherEnvironment",
    "RankEnv",
    "detect",
    "expected_world_size",
    "export_defaults",
    "port_from_job_id",
]

# Set by ringleader's scheduler on each pod (see server/backends/pod_env.py).
POD_GPUS = "RINGLEADER_POD_GPUS"  # how many devices are bound to this pod
GPU_FRACTION = "RINGLEADER_GPU_FRACTION"  # its share of each, when under 1
GPU_MEMORY_BYTES = "RINGLEADER_GPU_MEMORY_BYTES"  # or the device memory it asked for
CPU_AFFINITY = "RINGLEADER_CPU_AFFINITY"  # "0,1": the cores its processes are pinned to
_PET_NAMES = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK")
#: ringleader name -> torchrun twin; both are set by the launcher and must agree.
_TWINS = {
    "RINGLEADER_RANK": "RANK",
    "RINGLEADER_LOCAL_RANK": "LOCAL_RANK",
    "RINGLEADER_WORLD_SIZE": "WORLD_SIZE",
    "RINGLEADER_MASTER_ADDR": "MASTER_ADDR",
    "RINGLEADER_MASTER_PORT": "MASTER_PORT",
}


def _from_ringleader(environ: Mapping[str, str]) -> RankEnv:
    for ours, theirs in _TWINS.items():
        if environ.get(ours) and environ.get(theirs) and environ[ours] != environ[theirs]:
            raise EnvError(
                f"{ours}={environ[ours]} but {theirs}={environ[theirs]}: the environment was "
                "changed after ringleader set it (a launcher inside a launcher?)"
            )

    def pick(ours: str, theirs: str, default: int | None = None) -> int:
        return read_int(environ, ours if environ.get(ours) else theirs, default)

    world = pick("RINGLEADER_WORLD_SIZE", "WORLD_SIZE")
    return RankEnv(
        source="ringleader",
        rank=pick("RINGLEADER_RANK", "RANK"),
        local_rank=pick("RINGLEADER_LOCAL_RANK", "LOCAL_RANK", 0),
        world_size=world,
        local_world_size=pick("RINGLEADER_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", 1),
        node_rank=pick("RINGLEADER_NODE_RANK", "NODE_RANK", 0),
        nnodes=pick("RINGLEADER_NNODES", "NNODES", 1),
        master_addr=first_set(environ, "RINGLEADER_MASTER_ADDR", "MASTER_ADDR"),
        master_port=read_port(environ, "RINGLEADER_MASTER_PORT") or read_port(environ),
    )


def _from_torchrun(environ: Mapping[str, str]) -> RankEnv:
    world = read_int(environ, "WORLD_SIZE")
    local_rank = read_int(environ, "LOCAL_RANK", 0)
    # Hand-written env:// setups often omit LOCAL_WORLD_SIZE; local_rank + 1 is a floor.
    local_world = read_int(environ, "LOCAL_WORLD_SIZE", local_rank + 1)
    node_rank = read_int(environ, "GROUP_RANK", read_int(environ, "NODE_RANK", 0))
    return RankEnv(
        source="torchrun",
        rank=read_int(environ, "RANK"),
        local_rank=local_rank,
        world_size=world,
        local_world_size=local_world,
        node_rank=node_rank,
        nnodes=read_int(environ, "NNODES", max(1, -(-world // local_world))),
        master_addr=environ.get("MASTER_ADDR") or None,
        master_port=read_port(environ),
    )


def expected_world_size(environ: Mapping[str, str], explicit: int | None = None) -> int | None:
    """The world size the job was launched for, if anybody said so."""
    if explicit is not None:
        return explicit
    for name in ("RINGLEADER_EXPECTED_WORLD_SIZE", "RINGLEADER_WORLD_SIZE", "WORLD_SIZE"):
        if environ.get(name):
            return read_int(environ, name)
    return None


def _validate(env: RankEnv) -> RankEnv:
    if env.world_size < 1 or not 0 <= env.rank < env.world_size:
        raise EnvError(f"{env.source}: rank {env.rank} is outside a world of {env.world_size}")
    if env.local_world_size < 1 or not 0 <= env.local_rank < env.local_world_size:
        raise EnvError(
            f"{env.source}: local rank {env.local_rank} is outside {env.local_world_size} "
            "local rank(s)"
        )
    if env.world_size > 1 and env.master_addr is None:
        raise EnvError(
            f"{env.source}: a world of {env.world_size} needs MASTER_ADDR (the host of rank 0); "
            "export it (with mpirun: -x MASTER_ADDR=<host of rank 0>)"
        )
    if env.world_size > 1 and env.master_port is None:
        raise EnvError(f"{env.source}: a world of {env.world_size} needs MASTER_PORT")
    return env


def detect(environ: Mapping[str, str], expected: int | None = None) -> RankEnv:
    """Read the first launcher's names found in ``environ``; see the module docstring.

    ``expected`` (or ``RINGLEADER_EXPECTED_WORLD_SIZE``) only matters when no launcher
    is found: a world of one is then an error rather than a default.
    """
    if environ.get("RINGLEADER_RANK"):
        return _validate(_from_ringleader(environ))
    if environ.get("TORCHELASTIC_RUN_ID") or all(
        environ.get(n) for n in ("RANK", "WORLD_SIZE", "LOCAL_RANK")
    ):
        return _validate(_from_torchrun(environ))
    if environ.get("OMPI_COMM_WORLD_RANK"):
        return _validate(from_openmpi(environ))
    if environ.get("SLURM_PROCID"):
        return _validate(from_slurm(environ))
    if any(environ.get(n) for n in _PET_NAMES) or (
        environ.get("RANK") and environ.get("WORLD_SIZE")
    ):
        return _validate(from_kubeflow(environ))
    if expected is None and environ.get("RINGLEADER_EXPECTED_WORLD_SIZE"):
        expected = read_int(environ, "RINGLEADER_EXPECTED_WORLD_SIZE")
    if expected is not None and expected > 1:
        raise NoLauncherEnvironment(
            f"no launcher environment was found (no RINGLEADER_*, RANK/WORLD_SIZE, SLURM_*, "
            f"OMPI_COMM_WORLD_* or PET_* variables) but a world of {expected} ranks is "
            "expected: each process would form a world of one and train alone. Start the "
            "script with `ringleader`, torchrun, srun or mpirun."
        )
    return RankEnv(source="none")


def export_defaults(env: RankEnv, environ: MutableMapping[str, str]) -> dict[str, str]:
    """Fill the torchrun names (those ``init_method="env://"`` reads and more), where absent.

    Returns what was filled.  The user's own values are never overwritten, so a
    deliberate override still wins; ``source == "none"`` fills nothing.  The local
    and node names are filled too because, once RANK/WORLD_SIZE/LOCAL_RANK are set,
    a later :func:`detect` reads the environment as torchrun's and must get the
    same answer.
    """
    if env.source == "none":
        return {}
    wanted = {
        "RANK": str(env.rank),
        "WORLD_SIZE": str(env.world_size),
        "LOCAL_RANK": str(env.local_rank),
        "LOCAL_WORLD_SIZE": str(env.local_world_size),
        "GROUP_RANK": str(env.node_rank),
        "NODE_RANK": str(env.node_rank),
        "NNODES": str(env.nnodes),
        "MASTER_ADDR": env.master_addr,
        "MASTER_PORT": None if env.master_port is None else str(env.master_port),
    }
    filled = {k: v for k, v in wanted.items() if v is not None and not environ.get(k)}
    environ.update(filled)
    return filled

"""The environment a pod gets from its scheduler binding, on any backend.

- ``CUDA_VISIBLE_DEVICES``: the devices bound to the pod ("" for a pod bound
  without GPUs, so it cannot use a device the scheduler gave someone else);
- ``RINGLEADER_GPU_FRACTION`` (and ``RINGLEADER_GPU_MEMORY_BYTES`` for a
  memory request): the pod's share of each of its devices; the runtime
  helper caps the process's GPU memory to it
  (``torch.cuda.set_per_process_memory_fraction``);
- ``OMP_NUM_THREADS``: the pod's whole CPU cores requested (at least 1);
- ``RINGLEADER_CPU_AFFINITY``: on this machine's own node, the whole cores
  a pod's processes are pinned to (the agent applies it where the OS lets it);
- ``RINGLEADER_NODE`` / ``RINGLEADER_NODE_KIND``: where it was placed
  (``simulated`` nodes run their pods on the server's machine);
- ``RINGLEADER_POD``: the pod's name (``NAME-worker-1``);
- Run:ai's names for the same facts: ``NODE_NAME`` (the node) and
  ``RUNAI_NUM_OF_GPUS`` (its devices, or its share of one: ``0.5``).

The user's own variables win over all but the devices, the share and the
pod's name, which are the binding itself.

An MPI launcher pod (mpirun) gets only where it is (``launcher_env``): the
ranks a shell in it starts with mpirun on this machine inherit its
environment, so it must not hide the devices the workers' pods hold.
"""

from __future__ import annotations

import math

from ringleader.runtime.env import CPU_AFFINITY, GPU_FRACTION, GPU_MEMORY_BYTES, POD_GPUS
from ringleader.server.backends.base import PodPlacement


def launcher_env(pod: str, placement: PodPlacement, user_env: dict[str, str]) -> dict[str, str]:
    """What an MPI launcher pod (mpirun itself) gets: where it is, and nothing it binds."""
    env = {
        "RINGLEADER_POD": pod,
        "RINGLEADER_NODE": placement.node,
        "RINGLEADER_NODE_KIND": placement.node_kind,
    }
    if "NODE_NAME" not in user_env:
        env["NODE_NAME"] = placement.node
    return env


def gpu_count(placement: PodPlacement) -> str:
    """Run:ai's ``RUNAI_NUM_OF_GPUS``: whole devices, or the share of one (``0.25``)."""
    shares = [g.share for g in placement.gpus if g.share < 1]
    if shares and len(placement.gpus) == 1:
        return f"{shares[0]:g}"
    return str(len(placement.gpus))


def pod_env(
    pod: str, placement: PodPlacement, user_env: dict[str, str], cores: tuple[int, ...] = ()
) -> dict[str, str]:
    """``cores``: the CPU cores its processes are pinned to, when the backend
    could give it whole cores of its own (``RINGLEADER_CPU_AFFINITY``)."""
    env = {
        **launcher_env(pod, placement, user_env),
        "RUNAI_NUM_OF_GPUS": gpu_count(placement),
        "CUDA_VISIBLE_DEVICES": ",".join(str(g.index) for g in placement.gpus),
        POD_GPUS: str(len(placement.gpus)),
        # nvidia-smi's indices (what the inventory lists) are PCI bus order; CUDA's
        # default order differs on mixed machines.
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }
    shares = [g for g in placement.gpus if g.share < 1]
    if shares:
        env[GPU_FRACTION] = f"{min(g.share for g in shares):g}"
        memory = [g.memory_bytes for g in shares if g.memory_bytes]
        if memory:
            env[GPU_MEMORY_BYTES] = str(min(memory))
    if placement.cpu_cores and "OMP_NUM_THREADS" not in user_env:
        env["OMP_NUM_THREADS"] = str(max(1, math.floor(placement.cpu_cores)))
    if cores:
        env[CPU_AFFINITY] = ",".join(map(str, cores))
    return env


def assign_cores(
    wanted: dict[str, float], available: tuple[int, ...], busy: frozenset[int]
) -> dict[str, tuple[int, ...]]:
    """Whole cores of their own for pods that asked for at least one (pod -> cores),
    lowest free first; a pod that cannot get all of its cores gets none (it then
    shares the machine, unpinned)."""
    free = [c for c in sorted(available) if c not in busy]
    out: dict[str, tuple[int, ...]] = {}
    for pod, cpu in wanted.items():
        count = math.floor(cpu)
        if count >= 1 and count <= len(free):
            out[pod], free = tuple(free[:count]), free[count:]
    return out

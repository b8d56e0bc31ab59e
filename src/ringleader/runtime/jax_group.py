"""``runtime.init()`` for a JAX program: ``jax.distributed.initialize()`` from the
launcher's names, CPU collectives over gloo, and the world verified.

Why: JAX reads ``JAX_COORDINATOR_ADDRESS`` by itself but takes the process count
and id only as arguments (or from its own cluster detection: Slurm, Open MPI, TPU
and GKE, not ringleader), so a program launched by ringleader would otherwise
pass them by hand.  As with torch, the world that formed is checked with a real
collective: the sum of every process's id must be ``0 + 1 + ... + (N - 1)``.

Names read: ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``
(``launch/frameworks/jax.py`` sets them), else torchrun's (``MASTER_ADDR``,
``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``), so ``--framework pytorch`` works too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

COORDINATOR = "JAX_COORDINATOR_ADDRESS"
NUM_PROCESSES = "JAX_NUM_PROCESSES"
PROCESS_ID = "JAX_PROCESS_ID"


def wants_jax(environ: Mapping[str, str], imported: Mapping[str, Any]) -> bool:
    """A JAX program (it imported jax and not torch) under a launcher."""
    return (
        "jax" in imported
        and "torch" not in imported
        and (PROCESS_ID in environ or "RANK" in environ)
    )


def place(environ: Mapping[str, str]) -> tuple[str, int, int]:
    """(coordinator "host:port", process count, this process's id) from ``environ``."""
    coordinator = environ.get(COORDINATOR) or (f"{environ['MASTER_ADDR']}:{environ['MASTER_PORT']}")
    count = int(environ.get(NUM_PROCESSES) or environ["WORLD_SIZE"])
    index = int(environ.get(PROCESS_ID) or environ["RANK"])
    return coordinator, count, index


class JaxWorld(NamedTuple):
    """Where this process sits in the JAX world that formed (``dist`` makes its context)."""

    rank: int
    world_size: int
    device: Any  # its first local jax.Device


def init_jax(timeout_s: float, expected: int | None) -> JaxWorld:
    """Join the JAX world this process was launched into.  A world that is not the one
    launched raises ``ValueError`` saying what formed (``dist.init`` re-raises it as
    ``WorldSizeMismatch``)."""
    import jax

    coordinator, count, index = place(os.environ)
    if count > 1 and not jax.distributed.is_initialized():
        # CPU devices' collectives (a GPU's are NCCL's whatever this says); asked before
        # anything starts a backend, which initialize() must precede.
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            coordinator_address=coordinator, num_processes=count, process_id=index,
            initialization_timeout=int(timeout_s),
        )  # fmt: skip
    joined, id_sum = _joined()
    want = expected or count
    if joined != want or id_sum != want * (want - 1) // 2:
        raise ValueError(
            f"JAX formed a world of {joined} process(es) (ids summing to {id_sum}), "
            f"not the {want} launched (check JAX_NUM_PROCESSES and JAX_PROCESS_ID)"
        )
    return JaxWorld(index, count, jax.local_devices()[0])


def _joined() -> tuple[int, int]:
    """(processes that answered, the sum of their ids), by an all-gather across them."""
    import jax
    import numpy as np

    if jax.process_count() == 1:
        return 1, 0
    from jax.experimental import multihost_utils

    ids = multihost_utils.process_allgather(np.array([jax.process_index()]))
    return int(ids.size), int(ids.sum())

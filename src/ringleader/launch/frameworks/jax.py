"""JAX (Run:ai ``jax``, Kubeflow's JAXJob): workers only; process 0 (worker 0) is the
coordinator.

Every rank gets ``JAX_COORDINATOR_ADDRESS`` (process 0's ``MASTER_ADDR:MASTER_PORT``,
which ``jax.distributed.initialize()`` reads by itself), ``JAX_NUM_PROCESSES`` and
``JAX_PROCESS_ID``: the names Kubeflow's JAX runtime and other launchers use.  JAX
takes the count and the id only from arguments (or its own cluster detection), so
a program passes them, or calls ``ringleader.runtime.init()``, which initialises
JAX from these names when the program imported JAX.
"""

from __future__ import annotations

from ringleader.launch.frameworks import WORKERS_ONLY, Framework, RankPlace
from ringleader.runtime.jax_group import COORDINATOR, NUM_PROCESSES, PROCESS_ID


def jax_env(place: RankPlace) -> dict[str, str]:
    return {
        COORDINATOR: f"{place.master_addr}:{place.master_port}",
        NUM_PROCESSES: str(place.world_size),
        PROCESS_ID: str(place.rank),
    }


FRAMEWORK = Framework(
    name="jax",
    spec_name="JAX",
    summary="JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID",
    layout=WORKERS_ONLY,
    env=jax_env,
    workers_help="Worker pods (worker 0 is JAX's coordinator, process 0).",
    example="python -m ringleader.examples.jax_digits",
)

"""PyTorch: a master (rank 0) plus workers; the agents start every rank.

Its environment contract is torchrun's (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), which ``plan.rank_env`` gives
every agent-started rank, so nothing is added here.
"""

from __future__ import annotations

from ringleader.launch.frameworks import MASTER_WORKERS, Framework

FRAMEWORK = Framework(
    name="pytorch",
    spec_name="PyTorch",
    summary="torchrun's environment",
    layout=MASTER_WORKERS,
    supervisor="ringleader.launch.supervisor:Supervisor",
    example="python -m ringleader.examples.digits",
)

"""PyTorch: a master (rank 0) plus workers; the agents start every rank.

Its environment contract is torchrun's (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), which ``plan.rank_env`` gives
every agent-started rank; what it adds is MLX's ring (``MLX_RANK``,
``MLX_HOSTFILE`` and that file on every node: ``launch/mlx.py``), because an MLX
program runs under the default framework (seed 003's ``ringleader launch
--hostfile hosts.json -- python3 train.py``).
"""

from __future__ import annotations

from ringleader.launch import mlx
from ringleader.launch.frameworks import MASTER_WORKERS, Framework

FRAMEWORK = Framework(
    name="pytorch",
    spec_name="PyTorch",
    summary="torchrun's environment",
    layout=MASTER_WORKERS,
    supervisor="ringleader.launch.supervisor:Supervisor",
    env=mlx.ring_names,
    files=mlx.ring_files,
    example="python -m ringleader.examples.digits",
)

"""MLX's ring backend: the names that make ``mx.distributed.init()`` form one world.

Why: MLX (``mx.distributed.init()``, backend ``"any"``) finds its peers through
either mpirun's environment or its ring backend's.  ``ringleader launch``
starts ranks itself (like torchrun), so without the ring backend's names an
MLX program silently runs as N worlds of one.

Nomenclature (MLX's own, from ``mlx.launch``'s ``launch_ring`` and
``mlx/distributed/ring``):
- ``MLX_RANK``: this process's rank;
- ``MLX_HOSTFILE``: a JSON file that lists, per rank in rank order, the
  ``"ip:port"`` addresses that rank listens on (one per connection):
  ``[["10.0.0.1:40001"], ["10.0.0.2:40007"], ...]``.  Rank *i* listens on its
  own entry and connects to its ring neighbours' entries;
- ``MLX_RING_VERBOSE=1``: MLX logs its connections (the user's to set, ``-e``).

Invariants:
- each rank's port is picked *on that rank's host* by its agent
  (``netif.free_ports``), fresh for every attempt, and the complete list
  reaches every host in its ``start`` message before any rank starts;
- a world of one gets ``MLX_RANK=0`` and no hostfile: MLX's ring backend
  waits forever on a one-entry hostfile, while without one it is a world of one;
- standard library only: the agent imports this module.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing's, without importing typing (the agent's start-up)
if TYPE_CHECKING:
    from typing import Any

RANK = "MLX_RANK"
HOSTFILE = "MLX_HOSTFILE"


def hostfile_text(addresses: list[str]) -> str:
    """The ``MLX_HOSTFILE`` JSON for ranks listening on ``addresses`` ("ip:port", rank order)."""
    return json.dumps([[address] for address in addresses])


def ring_env(rank: int, world_size: int, hostfile_path: str | None) -> dict[str, str]:
    """The ring backend's names for one rank; no hostfile in a world of one (see above)."""
    env = {RANK: str(rank)}
    if world_size > 1 and hostfile_path:
        env[HOSTFILE] = hostfile_path
    return env


HOSTFILE_NAME = "mlx-hostfile.json"


def ring_files(peers: tuple[str, ...], world_size: int) -> dict[str, str]:
    """The ring's hostfile for every node of a gang (``Framework.files``); none alone."""
    return {HOSTFILE_NAME: hostfile_text(list(peers))} if world_size > 1 and peers else {}


def ring_names(place: Any) -> dict[str, str]:
    """The ring's names for one rank (``Framework.env``, a ``frameworks.RankPlace``)."""
    hostfile = f"{place.files_dir}/{HOSTFILE_NAME}" if place.peers and place.files_dir else None
    return ring_env(place.rank, place.world_size, hostfile)

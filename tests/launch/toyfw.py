"""The test suite's own toy framework: a plug-in is one module and one registration.

Workers only (no master or launcher pod); each rank learns its place from
``TOY_RANK``/``TOY_WORLD`` (as TensorFlow's would from ``TF_CONFIG``), and
the agents start the ranks.  ``register()`` is the one registration.
"""

from __future__ import annotations

from ringleader.launch import frameworks
from ringleader.launch.frameworks import WORKERS_ONLY, Framework, RankPlace


def toy_env(place: RankPlace) -> dict[str, str]:
    return {
        "TOY_RANK": str(place.rank),
        "TOY_WORLD": str(place.world_size),
        "TOY_PEERS": ",".join(place.peers),  # every rank's "ip:port", as TF_CONFIG needs
    }


FRAMEWORK = Framework(
    name="toyfw",
    summary="the test suite's toy",
    layout=WORKERS_ONLY,
    env=toy_env,
    uses_slots=True,
)


def register() -> None:
    frameworks.register(FRAMEWORK)

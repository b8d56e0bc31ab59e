"""TensorFlow (Run:ai ``tf``, Kubeflow's TFJob): a chief (rank 0) plus workers, each
told the whole cluster in ``TF_CONFIG``.

``tf.distribute.MultiWorkerMirroredStrategy()`` reads ``TF_CONFIG`` by itself:
``{"cluster": {"chief": ["ip:port"], "worker": ["ip:port", ...]}, "task": {"type":
"chief", "index": 0}}``.  Each address is a port its own host's agent found free
when the gang started (``RankPlace.peers``); the task's gRPC server listens there.
A world of one gets no ``TF_CONFIG``: TensorFlow then runs alone, as it would
without a launcher.
"""

from __future__ import annotations

import json

from ringleader.launch.frameworks import CHIEF_WORKERS, Framework, RankPlace

CONFIG = "TF_CONFIG"


def tf_config(place: RankPlace) -> dict[str, str]:
    """``TF_CONFIG`` for one rank: rank 0 is the chief, rank ``i`` worker ``i - 1``."""
    if place.world_size < 2 or len(place.peers) < place.world_size:
        return {}
    cluster = {"chief": [place.peers[0]], "worker": list(place.peers[1 : place.world_size])}
    task = {"type": "chief", "index": 0} if place.rank == 0 else {
        "type": "worker", "index": place.rank - 1
    }  # fmt: skip
    return {CONFIG: json.dumps({"cluster": cluster, "task": task}, separators=(",", ":"))}


FRAMEWORK = Framework(
    name="tf",
    spec_name="TF",
    summary="TF_CONFIG (chief + workers)",
    layout=CHIEF_WORKERS,
    env=tf_config,
    workers_help="Worker pods besides the chief.",
    wizard_label="TensorFlow",
    example="python train.py",
)

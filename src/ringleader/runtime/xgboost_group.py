"""XGBoost's collective from the launcher's names: the master (rank 0) runs XGBoost's
tracker on ``MASTER_ADDR:MASTER_PORT``, every rank joins it.

Why: Kubeflow's XGBoostJob contract gives each pod only ``MASTER_ADDR``,
``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK``; someone must start the tracker
(``xgboost.tracker.RabitTracker``) before the ranks call
``xgboost.collective.init``.  ``xgboost_collective()`` is that someone, so a
training script needs one ``with`` and nothing else::

    with runtime.xgboost_collective():
        booster = xgboost.train(params, dtrain, rounds)   # rows split by rank

A world of one needs no tracker: the block runs as plain XGBoost.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ringleader.runtime.env import detect


def _wait_for_tracker(host: str, port: int, timeout_s: float) -> None:
    """Until the master's tracker accepts connections (or ``timeout_s``): a worker that
    joins before it listens is refused and XGBoost retries with a growing back-off,
    seconds lost on every start."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.05)


@contextmanager
def xgboost_collective(timeout_s: int = 300) -> Iterator[int]:
    """While open, this rank is in XGBoost's communicator; yields its rank."""
    from xgboost import collective
    from xgboost.tracker import RabitTracker

    env = detect(os.environ)
    if env.world_size == 1:
        yield 0
        return
    tracker = None
    if env.rank == 0:
        tracker = RabitTracker(
            n_workers=env.world_size, host_ip=env.master_addr, port=int(env.master_port),
            sortby="task", timeout=timeout_s,
        )  # fmt: skip
        tracker.start()
    else:
        _wait_for_tracker(str(env.master_addr), int(env.master_port), timeout_s)
    args = {"dmlc_tracker_uri": env.master_addr, "dmlc_tracker_port": int(env.master_port),
            "dmlc_task_id": str(env.rank), "dmlc_timeout": timeout_s}  # fmt: skip
    try:
        with collective.CommunicatorContext(**args):
            yield collective.get_rank()
    finally:
        if tracker is not None:
            tracker.wait_for(timeout_s)

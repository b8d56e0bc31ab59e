"""XGBoost (Run:ai ``xgboost``, Kubeflow's XGBoostJob): a master (rank 0) plus workers.

Kubeflow's contract is torchrun's names (``MASTER_ADDR``, ``MASTER_PORT``,
``WORLD_SIZE``, ``RANK``), which every rank has already: the master runs XGBoost's
tracker on ``MASTER_ADDR:MASTER_PORT`` and every rank joins it through
``xgboost.collective``.  XGBoost's own launchers' names (``DMLC_TRACKER_URI``,
``DMLC_TRACKER_PORT``, ``DMLC_NUM_WORKER``, ``DMLC_TASK_ID``) are added, and
``ringleader.runtime.xgboost_collective()`` does both steps for a program.

A pod takes whole GPUs: XGBoost has no notion of a shared device, so a fraction is
refused at submission.
"""

from __future__ import annotations

from typing import Any

from ringleader.launch.frameworks import MASTER_WORKERS, Framework, RankPlace


def dmlc_env(place: RankPlace) -> dict[str, str]:
    return {
        "DMLC_TRACKER_URI": place.master_addr,
        "DMLC_TRACKER_PORT": str(place.master_port),
        "DMLC_NUM_WORKER": str(place.world_size),
        "DMLC_TASK_ID": str(place.rank),
    }


def whole_gpus(spec: Any) -> tuple[str, str] | None:
    """A GPU fraction (``gpuPortionRequest`` < 1) on the workers or the master."""
    for where, pod in (("spec", spec.spec), ("masterSpec", spec.master())):
        compute = pod.compute
        if compute.gpu_portion_request is not None and compute.gpu_portion_request < 1:
            return (
                f"XGBoost pods take whole GPUs (gpuPortionRequest "
                f"{compute.gpu_portion_request:g}): ask for whole devices "
                "(gpuDevicesRequest, -g 1)",
                f"{where}.compute.gpuPortionRequest",
            )
    return None


FRAMEWORK = Framework(
    name="xgboost",
    spec_name="XGBoost",
    summary="torchrun's names and DMLC_*; the master runs XGBoost's tracker",
    layout=MASTER_WORKERS,
    env=dmlc_env,
    check=whole_gpus,
    workers_help="Worker pods besides the master.",
    example="python -m ringleader.examples.xgboost_digits",
)

"""What training code imports: join the job, log per rank, report metrics, record fatal errors.

Typical use::

    from ringleader import runtime

    ctx = runtime.init()              # reads the launcher's env, verifies the world
    model = runtime.prepare(model)    # DDP on ctx.device
    sampler = runtime.shard(dataset)  # DistributedSampler for this rank
    ...
    runtime.report(step, loss=loss, samples=n)  # charted by the server; a no-op elsewhere
    runtime.shutdown()

A JAX program's ``init()`` joins JAX's world instead (``jax.distributed``, from
``JAX_*`` or torchrun's names); an XGBoost program's ranks meet in
``with runtime.xgboost_collective():``, whose rank 0 runs XGBoost's tracker.

Works under ringleader, torchrun, Slurm (srun), OpenMPI (mpirun), a Kubeflow
PyTorchJob, or with no launcher at all (a world of one).  Importing this package
does not import torch (the launcher imports :mod:`.errorfile` and :mod:`.env`);
torch is imported when ``init()`` and friends are first called.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the submodule that defines it.  Imported on first use (PEP 562), so the
# launcher's agents and MPI rank wrappers, which import .env and .errorfile,
# do not pay for .dist and .checkpoint.
_EXPORTS = {
    "checkpoint_dir": "checkpoint",
    "load_checkpoint": "checkpoint",
    "save_checkpoint": "checkpoint",
    "DistContext": "dist",
    "WorldSizeMismatch": "dist",
    "get_context": "dist",
    "init": "dist",
    "is_main": "dist",
    "prepare": "dist",
    "shard": "dist",
    "shutdown": "dist",
    "EnvError": "env",
    "NoLauncherEnvironment": "env",
    "RankEnv": "env",
    "detect": "env",
    "install_error_recorder": "errorfile",
    "read_error_file": "errorfile",
    "record": "errorfile",
    "get_logger": "log",
    "report": "metrics",
    "xgboost_collective": "xgboost_group",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "DistContext",
    "EnvError",
    "NoLauncherEnvironment",
    "RankEnv",
    "WorldSizeMismatch",
    "checkpoint_dir",
    "detect",
    "get_context",
    "get_logger",
    "init",
    "install_error_recorder",
    "is_main",
    "load_checkpoint",
    "prepare",
    "read_error_file",
    "record",
    "report",
    "save_checkpoint",
    "shard",
    "shutdown",
    "xgboost_collective",
]

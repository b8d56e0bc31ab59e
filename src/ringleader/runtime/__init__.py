"""What training code imports: join the job, log per rank, record fatal errors.

Typical use::

    from ringleader import runtime

    ctx = runtime.init()              # reads the launcher's env, verifies the world
    model = runtime.prepare(model)    # DDP on ctx.device
    sampler = runtime.shard(dataset)  # DistributedSampler for this rank
    ...
    runtime.shutdown()

Works under ringleader, torchrun, Slurm (srun), OpenMPI (mpirun), a Kubeflow
PyTorchJob, or with no launcher at all (a world of one).  Importing this package
does not import torch (the launcher imports :mod:`.errorfile` and :mod:`.env`);
torch is imported when ``init()`` and friends are first called.
"""

from ringleader.runtime.checkpoint import checkpoint_dir, load_checkpoint, save_checkpoint
from ringleader.runtime.dist import (
    DistContext,
    WorldSizeMismatch,
    get_context,
    init,
    is_main,
    prepare,
    shard,
    shutdown,
)
from ringleader.runtime.env import EnvError, NoLauncherEnvironment, RankEnv, detect
from ringleader.runtime.errorfile import install_error_recorder, read_error_file, record
from ringleader.runtime.log import get_logger

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
    "save_checkpoint",
    "shard",
    "shutdown",
]

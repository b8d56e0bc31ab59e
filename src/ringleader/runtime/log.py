"""A rank-aware logger, so N ranks do not print every line N times (torch-free).

Rank 0 logs at INFO; the other ranks log WARNING and above only, unless
``all_ranks=True``.  Every line carries ``rank R/W`` so interleaved output from
many ranks can still be told apart.  The rank comes from the launcher's
environment (see :mod:`ringleader.runtime.env`), so the logger works before
``init()`` and without torch.
"""

from __future__ import annotations

import logging
import os
import sys

from ringleader.runtime.env import EnvError, detect

__all__ = ["get_logger"]

_HANDLER_TAG = "_ringleader_handler"


def get_logger(name: str = "ringleader", all_ranks: bool = False) -> logging.Logger:
    """Return ``logging.getLogger(name)`` configured for this rank; safe to call repeatedly.

    The logger gets its own stderr handler and does not propagate, so lines are not
    doubled by a root handler the training code may also configure.
    """
    try:
        env = detect(os.environ)
        rank, world = env.rank, env.world_size
    except EnvError:  # a malformed env is init()'s to report, not the logger's
        rank, world = 0, 1
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO if rank == 0 or all_ranks else logging.WARNING)
    logger.propagate = False
    fmt = f"%(asctime)s rank {rank}/{world} %(levelname)s %(name)s: %(message)s"
    for handler in logger.handlers:
        if getattr(handler, _HANDLER_TAG, False):
            handler.setFormatter(logging.Formatter(fmt))
            return logger
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt))
    setattr(handler, _HANDLER_TAG, True)
    logger.addHandler(handler)
    return logger

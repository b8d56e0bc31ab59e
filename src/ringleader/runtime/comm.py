"""Put a communication mode (:mod:`.modes`) and the step timers on a DDP model.

Every mode is torch's own code: the DDP communication hooks of
``torch.distributed.algorithms.ddp_comm_hooks`` (``allreduce_hook`` for exact
DDP, ``fp16_compress_hook``, ``bf16_compress_hook``, ``powerSGD_hook`` with a
``PowerSGDState``, ``post_localSGD_hook``) and, for local SGD,
``model_averaging.averagers.PeriodicModelAverager`` run after each optimizer
step.  Nothing here sends a byte itself.

Each hook is registered inside a thin timing wrapper (``_Timer.wrap``) that
notes when the last gradient bucket became ready and when each bucket's
future completed; the gap is the communication the step waited for
(:mod:`.steptime`).  ``allreduce_hook`` is what DDP's built-in all-reduce does
(divide by the world, sum), so exact DDP stays bit-identical with the timer on
(tests/runtime/test_comm_modes.py proves it).

PowerSGD on gloo: its buckets are sent one after the other (``_Timer(serial=True)``):
PowerSGD chains all-reduces from callbacks on gloo's own thread, and interleaved
with the next bucket's they reach the ranks in different orders (gloo aborts the
process).  Overlap is lost for PowerSGD on gloo only; its messages are small.

bf16 on gloo: torch's ``register_comm_hook`` refuses a function *named*
``bf16_compress_hook`` unless CUDA with NCCL >= 2.10 is present, but gloo's
bf16 all-reduce works on CPU (tested here), so the same hook, registered
through the wrapper, runs on gloo too.  NCCL older than 2.10 is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ringleader.runtime import steptime
from ringleader.runtime.modes import WARMUP_STEPS, CommMode

if TYPE_CHECKING:
    import torch
    from torch.nn.parallel import DistributedDataParallel

__all__ = ["apply_mode"]


class _Timer:
    """Exposed communication per backward pass: last bucket ready -> all futures done."""

    def __init__(self, serial: bool = False) -> None:
        self._serial = serial
        self._previous: Any = None  # the last bucket's future (serial only)
        self._lock = threading.Lock()
        self._pending = 0
        self._ready_at: float | None = None
        self._done_at = 0.0

    def wrap(self, hook: Callable[[Any, Any], Any]) -> Callable[..., Any]:
        # No annotations: DDP compares them with the real types, and this module's
        # are strings (``from __future__ import annotations``).
        def timed_hook(state, bucket):  # type: ignore[no-untyped-def]
            started = time.perf_counter()
            if self._serial and bucket.index() > 0 and self._previous is not None:
                self._previous.wait()  # its chained all-reduces are issued: ours may go
            with self._lock:
                self._pending += 1
            future = hook(state, bucket)
            if bucket.is_last():
                with self._lock:
                    self._ready_at = started
            chained = future.then(self._done)
            self._previous = chained if self._serial else None
            return chained

        return timed_hook

    def _done(self, future: Any) -> Any:
        """A bucket's future completed (on the backend's thread): close the step if last."""
        now = time.perf_counter()
        with self._lock:
            self._pending -= 1
            self._done_at = max(self._done_at, now)
            finished = self._pending == 0 and self._ready_at is not None
            if finished:
                waited = self._done_at - (self._ready_at or now)
                self._ready_at, self._done_at = None, 0.0
        if finished:
            steptime.add(waited, steps=1)
        return future.value()


def _hook_and_state(mode: CommMode, backend: str) -> tuple[Callable[..., Any], Any]:
    """torch's hook for ``mode`` and its state (a process group of None: the world)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

    if mode.sync_every > 1:
        from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as local

        state = local.PostLocalSGDState(
            process_group=None,
            subgroup=None,
            start_localSGD_iter=WARMUP_STEPS,
            post_local_gradient_allreduce=False,  # local steps send nothing
        )
        return local.post_localSGD_hook, state
    if mode.compression == "fp16":
        return default_hooks.fp16_compress_hook, None
    if mode.compression == "bf16":
        _check_bf16(backend)
        return default_hooks.bf16_compress_hook, None
    if mode.compression == "powersgd":
        state = powersgd.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=mode.rank,
            start_powerSGD_iter=max(2, WARMUP_STEPS),
        )
        return powersgd.powerSGD_hook, state
    return default_hooks.allreduce_hook, None


def _check_bf16(backend: str) -> None:
    import torch

    if backend == "nccl" and torch.cuda.nccl.version() < (2, 10):
        raise ValueError(
            f"grad_compression='bf16' needs NCCL 2.10 or later (this torch has NCCL "
            f"{'.'.join(map(str, torch.cuda.nccl.version()))}): use 'fp16'"
        )
    if backend not in ("nccl", "gloo"):
        raise ValueError(
            f"grad_compression='bf16' is supported on the nccl and gloo backends, not {backend!r}"
        )


class _Averaging:
    """Local SGD's other half: average the parameters every H optimizer steps.

    Registered as a step post-hook of the given optimizer, or of every optimizer
    (torch's global hook) when ``prepare`` was given none, then filtered to the
    optimizers that hold this model's parameters.  Its all-reduce blocks, so its
    time is communication."""

    def __init__(self, model: torch.nn.Module, every: int) -> None:
        from torch.distributed.algorithms.model_averaging.averagers import (
            PeriodicModelAverager,
        )

        self.params = list(model.parameters())
        self.ids = {id(p) for p in self.params}
        self.averager = PeriodicModelAverager(period=every, warmup_steps=WARMUP_STEPS)

    def after_step(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        owned = any(id(p) in self.ids for g in optimizer.param_groups for p in g["params"])
        if not owned:
            return
        started = time.perf_counter()
        self.averager.average_parameters(self.params)
        steptime.add(time.perf_counter() - started)


def apply_mode(
    wrapped: DistributedDataParallel, mode: CommMode, backend: str, optimizer: Any = None
) -> list[Any]:
    """Register ``mode``'s hook (timed) on ``wrapped``, and for local SGD the
    averaging; returns the hook handles to remove at shutdown."""
    hook, state = _hook_and_state(mode, backend)
    # PowerSGD issues its second and third all-reduce from the first one's callback, on
    # gloo's thread, while the next bucket's first all-reduce is issued from backward:
    # ranks then disagree on the order ("Received data size doesn't match expected size",
    # abort).  On gloo its buckets go one after the other; NCCL keeps issue order.
    serial = mode.compression == "powersgd" and backend != "nccl"
    wrapped.register_comm_hook(state, _Timer(serial).wrap(hook))
    if mode.sync_every <= 1:
        return []
    averaging = _Averaging(wrapped.module, mode.sync_every)
    if optimizer is not None:
        return [optimizer.register_step_post_hook(averaging.after_step)]
    from torch.optim.optimizer import register_optimizer_step_post_hook

    return [register_optimizer_step_post_hook(averaging.after_step)]

"""Join the job's process group and prove the world is the one that was launched.

``init()`` is the one call training code makes: it reads the launcher's names
(:mod:`ringleader.runtime.env`), installs the error recorder, picks backend and
device, calls ``init_process_group`` and then *verifies* the world with a real
collective.  The verification exists because the worst failure of a launcher is
silent: ranks that each form a world of one (split brain) train N unsynchronised
copies of the model and report success.

Nomenclature: *expected* world size is what the job was launched for (argument,
else ``RINGLEADER_EXPECTED_WORLD_SIZE``, ``RINGLEADER_WORLD_SIZE``, ``WORLD_SIZE``);
*joined* world size is what the all-reduce counts.  Invariant after ``init()``
returns: joined == expected and the ranks 0..W-1 are each present once (checked
through the sum of ranks).

torch is imported inside functions only, so ``import ringleader.runtime`` stays
cheap and torch-free for the launcher.
"""

from __future__ import annotations

import gc
import os
import sys
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ringleader.runtime import modes
from ringleader.runtime.env import (
    GPU_FRACTION,
    GPU_MEMORY_BYTES,
    POD_GPUS,
    detect,
    export_defaults,
)
from ringleader.runtime.env import expected_world_size as _expected_from_env
from ringleader.runtime.errorfile import install_error_recorder
from ringleader.runtime.jax_group import init_jax, wants_jax
from ringleader.runtime.modes import CommMode

if TYPE_CHECKING:
    import torch

__all__ = [
    "DistContext",
    "WorldSizeMismatch",
    "get_context",
    "init",
    "is_main",
    "prepare",
    "shard",
    "shutdown",
]

DEFAULT_TIMEOUT_S = 300.0
#: Set by ``ringleader plan --script``: prepare() writes the model's shapes there.
PLAN_PROBE = "RINGLEADER_PLAN_PROBE"


class WorldSizeMismatch(RuntimeError):
    """The process group that formed is not the world the job was launched for."""


@dataclass(frozen=True)
class DistContext:
    """What a rank needs to know after ``init()``: where it is and what it computes on."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    device: torch.device  # a JAX program's: its first local jax.Device
    backend: str
    source: str = "none"

    @property
    def is_main(self) -> bool:
        return self.rank == 0


_context: DistContext | None = None
#: DDP wrappers made by prepare(); shutdown() frees their reducers (see there).
_prepared: weakref.WeakSet[Any] = weakref.WeakSet()
#: Optimizer step hooks of local SGD (prepare()); shutdown() removes them.
_hooks: list[Any] = []


def _pick_backend_and_device(
    backend: str | None, local_rank: int, local_world: int
) -> tuple[str, torch.device]:
    """nccl when every local rank can have a GPU of its own, else gloo on CPU.

    The choice uses only facts that are alike on every (homogeneous) node, because
    ranks that pick different backends would never meet.
    """
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    # Under the scheduler each pod sees only the devices bound to it (its own
    # CUDA_VISIBLE_DEVICES), so "a GPU per local rank" is per pod, not per machine.
    own_devices = POD_GPUS in os.environ
    # A fraction means other ranks may sit on the same device, which NCCL refuses
    # ("Duplicate GPU detected"): fractional gangs talk over gloo.
    shared = bool(os.environ.get(GPU_FRACTION) or os.environ.get(GPU_MEMORY_BYTES))
    if backend is None:
        fits = own_devices or local_world <= count
        backend = "nccl" if count > 0 and fits and not shared else "gloo"
    if count > 0 and (backend == "nccl" or shared):  # shared: gloo, the model on its share
        index = local_rank % count
        torch.cuda.set_device(index)
        return backend, torch.device("cuda", index)
    return backend, torch.device("cpu")


def gpu_share(environ: Mapping[str, str], total_bytes: int) -> float | None:
    """The fraction of a device this pod was given (None: the whole device).

    A memory request (``RINGLEADER_GPU_MEMORY_BYTES``) is turned into a fraction
    of this device's memory; a portion (``RINGLEADER_GPU_FRACTION``) is one.
    """
    memory = environ.get(GPU_MEMORY_BYTES)
    if memory and total_bytes > 0:
        return min(1.0, int(memory) / total_bytes)
    fraction = environ.get(GPU_FRACTION)
    return min(1.0, float(fraction)) if fraction else None


def cap_gpu_memory(device: torch.device) -> float | None:
    """Hold this process to its GPU share: PyTorch's caching allocator then
    refuses to grow past it (an out-of-memory error in this pod, not in the
    pods sharing the device).  Returns the fraction applied, if any."""
    import torch

    share = gpu_share(os.environ, torch.cuda.get_device_properties(device).total_memory)
    if share is not None and share < 1.0:
        torch.cuda.set_per_process_memory_fraction(share, device)
    return share


def _mismatch(joined: int, expected: int, source: str) -> WorldSizeMismatch:
    return WorldSizeMismatch(
        f"joined a world of {joined} rank(s) but {expected} were expected "
        f"(launcher environment: {source}); check MASTER_ADDR/MASTER_PORT and that every "
        "rank got the same WORLD_SIZE: ranks that do not meet train alone (split brain)"
    )


def init(
    backend: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    expected_world_size: int | None = None,
) -> DistContext:
    """Initialise torch.distributed from the launcher's environment and verify the world.

    Idempotent: a second call returns the first call's context, and a process group
    the caller initialised itself is adopted (and verified) rather than re-created.  Raises
    :class:`~ringleader.runtime.env.NoLauncherEnvironment` when no launcher is
    found but more than one rank is expected, and :class:`WorldSizeMismatch` when
    the group that formed has the wrong size (the group is destroyed first).
    """
    global _context
    install_error_recorder()
    if wants_jax(os.environ, sys.modules):  # a JAX program: JAX's world, not torch's
        if _context is None:
            _context = _jax_context(timeout_s, expected_world_size)
        return _context
    import torch
    import torch.distributed as dist

    if _context is not None and dist.is_initialized():
        return _context
    env = detect(os.environ, expected_world_size)
    expected = _expected_from_env(os.environ, expected_world_size) or env.world_size
    if env.world_size > expected:  # init would wait for ranks that were never started
        raise _mismatch(env.world_size, expected, env.source)
    export_defaults(env, os.environ)
    if dist.is_initialized():  # the caller's own group: adopt it, but still verify it
        backend = str(dist.get_backend())
    backend, device = _pick_backend_and_device(backend, env.local_rank, env.local_world_size)
    if device.type == "cuda":
        cap_gpu_memory(device)
    if not dist.is_initialized():
        _init_group(env.source, backend, env.rank, env.world_size, timeout_s)
    probe = torch.tensor([1, env.rank], dtype=torch.int64, device=device)
    dist.all_reduce(probe)
    joined, rank_sum = int(probe[0]), int(probe[1])
    if joined != expected or rank_sum != expected * (expected - 1) // 2:
        dist.destroy_process_group()
        if joined == expected:
            raise WorldSizeMismatch(
                f"{joined} rank(s) joined as expected but their ranks sum to {rank_sum}, not "
                f"{expected * (expected - 1) // 2}: some rank number is used twice; check RANK"
            )
        raise _mismatch(joined, expected, env.source)
    _context = DistContext(
        rank=env.rank,
        local_rank=env.local_rank,
        world_size=env.world_size,
        local_world_size=env.local_world_size,
        node_rank=env.node_rank,
        device=device,
        backend=backend,
        source=env.source,
    )
    return _context


def _jax_context(timeout_s: float, expected: int | None) -> DistContext:
    try:
        world = init_jax(timeout_s, expected)
    except ValueError as exc:
        raise WorldSizeMismatch(str(exc)) from None
    return DistContext(
        rank=world.rank, local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        world_size=world.world_size,
        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        node_rank=int(os.environ.get("NODE_RANK", "0")), device=world.device,
        backend="jax", source="jax",
    )  # fmt: skip


def _init_group(source: str, backend: str, rank: int, world: int, timeout_s: float) -> None:
    """env:// for every launcher (it also honours torchrun's agent store); none needs no port."""
    import torch.distributed as dist

    timeout = timedelta(seconds=timeout_s)
    if source == "none":  # nobody to meet: an in-memory store
        store = dist.HashStore()
        dist.init_process_group(backend, store=store, rank=0, world_size=1, timeout=timeout)
    else:
        dist.init_process_group(
            backend, init_method="env://", rank=rank, world_size=world, timeout=timeout
        )


def shutdown() -> None:
    """Destroy the process group if there is one, so ranks exit without torch's warning.

    First frees the C++ reducer of every model wrapped by :func:`prepare` (those
    models cannot train after this anyway).  A DDP reducer still alive when the
    interpreter exits can abort the process ("terminate called without an active
    exception", exit status 134) after training succeeded: seen in about one run in
    six with torch 2.13 + gloo, and never once the reducer is freed first.
    """
    global _context
    if _context is not None and _context.backend == "jax":
        import jax

        jax.distributed.shutdown()
        _context = None
        return
    import torch.distributed as dist

    for handle in _hooks:
        handle.remove()
    _hooks.clear()
    for wrapped in list(_prepared):
        if hasattr(wrapped, "reducer"):
            del wrapped.reducer
    _prepared.clear()
    gc.collect()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _context = None


def get_context() -> DistContext | None:
    """The context of the last successful ``init()``, or None."""
    return _context


def is_main() -> bool:
    """True on rank 0 (after ``init()``, or from the environment before it)."""
    if _context is not None:
        return _context.is_main
    return detect(os.environ).rank == 0


def _require_context() -> DistContext:
    if _context is None:
        raise RuntimeError("call ringleader.runtime.init() first")
    return _context


def prepare(
    model: torch.nn.Module,
    optimizer: Any = None,
    *,
    grad_compression: str | None = None,
    sync_every: int | None = None,
) -> Any:
    """Move ``model`` to this rank's device and wrap it in DistributedDataParallel.

    Returns the wrapped model, or ``(model, optimizer)`` when an optimizer is given.
    Parameters are moved in place, so an optimizer built before the call keeps
    pointing at the right tensors.

    ``grad_compression`` (``"none"``, ``"bf16"``, ``"fp16"``, ``"powersgd[:R]"``)
    and ``sync_every`` (H > 1: local SGD, parameters averaged every H optimizer
    steps) trade exactness for less traffic (:mod:`.modes`); not given, they come
    from ``RINGLEADER_GRAD_COMPRESSION`` / ``RINGLEADER_SYNC_EVERY`` (the launcher's
    ``--grad-compression`` / ``--sync-every``), else exact DDP.  Every mode times the
    communication each step waits for; ``runtime.report`` records it.
    """
    from torch.nn.parallel import DistributedDataParallel

    from ringleader.runtime.comm import apply_mode

    ctx = _require_context()
    mode = _mode(grad_compression, sync_every)
    model = model.to(ctx.device)
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    wrapped = DistributedDataParallel(model, device_ids=device_ids)
    _hooks.extend(apply_mode(wrapped, mode, ctx.backend, optimizer))
    _prepared.add(wrapped)
    if os.environ.get(PLAN_PROBE):
        _write_probe(os.environ[PLAN_PROBE], model)
    if not mode.exact and ctx.rank == 0:
        print(f"ringleader: training with {mode.describe()}", file=sys.stderr, flush=True)
    return wrapped if optimizer is None else (wrapped, optimizer)


def _write_probe(path: str, model: torch.nn.Module) -> None:
    """``ringleader plan --script``'s probe: the trainable parameters' shapes and dtype,
    written whole (a temporary file renamed) so the planner never reads half of it."""
    import json

    params = [p for p in model.parameters() if p.requires_grad]
    body = {"shapes": [list(p.shape) for p in params],
            "dtype": str(params[0].dtype) if params else None,
            "dtype_bytes": params[0].element_size() if params else 0}  # fmt: skip
    with open(f"{path}.tmp", "w", encoding="utf-8") as file:
        json.dump(body, file)
    os.replace(f"{path}.tmp", path)


def _mode(grad_compression: str | None, sync_every: int | None) -> CommMode:
    """The arguments' mode, each missing one from the launcher's variables; ValueError
    naming the argument or variable that is wrong."""
    names = {"grad_compression": "grad_compression", "sync_every": "sync_every"}
    if grad_compression is None:
        grad_compression = os.environ.get(modes.GRAD_COMPRESSION_ENV) or None
        names["grad_compression"] = modes.GRAD_COMPRESSION_ENV
    if sync_every is None:
        sync_every = os.environ.get(modes.SYNC_EVERY_ENV) or None  # type: ignore[assignment]
        names["sync_every"] = modes.SYNC_EVERY_ENV
    try:
        return modes.make_mode(grad_compression, sync_every)
    except ValueError as exc:
        where, problem = exc.args
        where = names[where]
        raise ValueError(f"{where}: {problem}") from None


def shard(dataset: Any, shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> Any:
    """A DistributedSampler giving this rank its 1/W of ``dataset`` (call ``set_epoch``!)."""
    from torch.utils.data.distributed import DistributedSampler

    ctx = _require_context()
    return DistributedSampler(
        dataset,
        num_replicas=ctx.world_size,
        rank=ctx.rank,
        shuffle=shuffle,
        seed=seed,
        drop_last=drop_last,
    )

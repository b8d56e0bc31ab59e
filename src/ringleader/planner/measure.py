"""The planner's measured inputs: one step's compute on this machine, and the link.

Why measured, not asked: users rarely know their forward/backward time or their
hosts' real all-reduce bandwidth, and a guess off by 2x makes the plan wrong by as
much. Compute: the model's forward, backward and optimizer step, timed here for a
few steps after a warm-up (the medians). Link: the doctor's bandwidth test
(``ringleader.cluster.busbw``, gloo across two hosts) on each pair of neighbours
in the ring the hosts form; the slowest pair sets the ring's pace.
"""

from __future__ import annotations

import importlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ringleader.errors import InvalidSpec

LINK_SIZES = ("4K", "16M")  # a latency probe and a size where bandwidth dominates


@dataclass(frozen=True)
class Compute:
    """One step of the model on this machine (medians, seconds) and its gradient."""

    params: int
    dtype_bytes: int
    forward_s: float
    backward_s: float
    other_s: float
    shapes: tuple[tuple[int, ...], ...] = ()  # each gradient's (PowerSGD's factor)
    threads: int = 1  # torch's threads while it was timed

    def figures(self) -> dict[str, float | int]:
        """The timed figures, without the shapes (``--json``'s ``measured_compute``)."""
        return {k: v for k, v in vars(self).items() if k != "shapes"}


@dataclass(frozen=True)
class Link:
    """The ring's link: bus bandwidth (bytes/s) and per-hop latency (s), and each
    measured pair (ssh targets, busbw, latency)."""

    busbw: float
    latency_s: float
    pairs: list[dict[str, Any]] = field(default_factory=list)
    hops: tuple[tuple[int, float], ...] = ()  # (width N, s a hop) of a small all-reduce


def load_factory(spec: str) -> Any:
    """``module:factory`` called with no arguments -> a ``torch.nn.Module``.

    The module is imported as ``python -m`` would, with this directory on the path.
    ``InvalidSpec`` naming --model when it cannot be.
    """
    import torch

    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidSpec(f"{spec!r} is not MODULE:FACTORY (e.g. mymodels:resnet)", "--model")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory: Callable[[], Any] = getattr(importlib.import_module(module_name), attribute)
    except ImportError as exc:
        raise InvalidSpec(f"cannot import {module_name!r}: {exc}", "--model") from None
    except AttributeError:
        raise InvalidSpec(f"{module_name!r} has no {attribute!r}", "--model") from None
    model = factory()
    if not isinstance(model, torch.nn.Module):
        raise InvalidSpec(f"{spec} returned a {type(model).__name__}, not a torch.nn.Module",
                          "--model")  # fmt: skip
    return model


def _input_shape(model: Any) -> tuple[int, ...]:
    """One sample's shape from the first layer that says it (a Linear's in_features)."""
    for module in model.modules():
        features = getattr(module, "in_features", None)
        if isinstance(features, int):
            return (features,)
        if hasattr(module, "in_channels"):
            break
    raise InvalidSpec(
        "the model's input shape cannot be told from its first layer: give one sample's"
        " shape, e.g. --input-shape 3,32,32",
        "--input-shape",
    )


def measure_compute(
    model: Any,
    batch_size: int,
    input_shape: tuple[int, ...] | None = None,
    steps: int = 5,
    threads: int | None = None,
) -> Compute:
    """Time ``steps`` training steps (after two to warm up) of ``model`` on random
    inputs of ``batch_size`` samples: forward, backward, then an SGD step."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise InvalidSpec("the model has no trainable parameters: nothing to all-reduce",
                          "--model")  # fmt: skip
    shape = input_shape or _input_shape(model)
    dtype = params[0].dtype
    batch = torch.randn(batch_size, *shape, dtype=dtype)
    optimizer = torch.optim.SGD(params, lr=1e-4)
    times: list[tuple[float, float, float]] = []
    try:
        for i in range(steps + 2):
            start = time.perf_counter()
            out = model(batch)
            out = out[0] if isinstance(out, (tuple, list)) else out
            loss = out.float().square().mean()
            forward = time.perf_counter()
            loss.backward()
            backward = time.perf_counter()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            end = time.perf_counter()
            if i >= 2:
                times.append((forward - start, backward - forward, end - backward))
    except (RuntimeError, TypeError, ValueError) as exc:
        raise InvalidSpec(f"the model failed on a batch of shape {tuple(batch.shape)}: {exc}"
                          " (is --input-shape right?)", "--input-shape") from None  # fmt: skip
    return Compute(
        params=sum(p.numel() for p in params),
        dtype_bytes=params[0].element_size(),
        forward_s=statistics.median(t[0] for t in times),
        backward_s=statistics.median(t[1] for t in times),
        other_s=statistics.median(t[2] for t in times),
        shapes=tuple(tuple(p.shape) for p in params),
        threads=torch.get_num_threads(),
    )


def ring_pairs(count: int) -> list[tuple[int, int]]:
    """The neighbours of a ring of ``count`` hosts: (0,1), (1,2), ..., (n-1,0)."""
    if count == 2:
        return [(0, 1)]
    return [(i, (i + 1) % count) for i in range(count)]


def measure_link(
    hosts: list[tuple[str, str]], ssh_config: str | None = None, workdir: str | None = None
) -> Link:
    """The doctor's gloo bandwidth test on each neighbouring pair of ``hosts`` (ssh
    target, address): the slowest pair's busbw at 16 MiB, its 4 KiB time per hop."""
    from ringleader.cluster import busbw

    if len(hosts) < 2:
        raise InvalidSpec("the link is measured between hosts: give at least two", "--hostfile")
    pairs = []
    for i, j in ring_pairs(len(hosts)):
        found = busbw.run_across(
            [hosts[i], hosts[j]], list(LINK_SIZES), workdir or os.getcwd(), ssh_config
        )
        if found.error:
            raise InvalidSpec(
                f"measuring the link between {hosts[i][0]} and {hosts[j][0]} failed:"
                f" {found.error}\n  fix: ringleader doctor --hostfile FILE says why",
                "--hostfile",
            )
        small, large = found.rows[0], found.rows[-1]
        pairs.append({"hosts": [hosts[i][0], hosts[j][0]], "busbw": large["busbw"],
                      "latency_s": small["seconds"] / 2})  # fmt: skip
    slowest = min(pairs, key=lambda p: p["busbw"])
    latency = max(p["latency_s"] for p in pairs)
    hops = [(2, pairs[0]["latency_s"])]  # 2 ranks run on the first two hosts
    for width in widths(len(hosts))[1:]:
        found = busbw.run_across(hosts[:width], [LINK_SIZES[0]], workdir or os.getcwd(),
                                 ssh_config)  # fmt: skip
        if found.error:
            raise InvalidSpec(
                f"measuring a hop on the first {width} hosts failed: {found.error}"
                "\n  fix: ringleader doctor --hostfile FILE says why",
                "--hostfile",
            )
        hops.append((width, found.rows[0]["seconds"] / (2 * (width - 1))))
    return Link(slowest["busbw"], latency, pairs, tuple(hops))


def widths(count: int) -> list[int]:
    """The widths a hop's latency is measured at: 2, 4, 8, ... and ``count``.

    Why more than a pair: where hosts share cores (or a switch), a hop waits longer
    as more ranks take part; PowerSGD's small all-reduces pay it 3 times a bucket."""
    found = {count} if count >= 2 else set()
    width = 2
    while width < count:
        found.add(width)
        width *= 2
    return sorted(found)


def mode_step_s(
    model: Any,
    batch_size: int,
    mode: Any,
    input_shape: tuple[int, ...] | None = None,
    steps: int = 5,
    threads: int | None = None,
) -> float:
    """One training step of ``model`` under ``mode`` as a rank runs it: wrapped in DDP
    with the mode's hook (``runtime.comm.apply_mode``, torch's own), on a world of one
    (gloo, an in-process store), timed after the mode's exact warm-up steps (the
    median of ``steps``).

    Why the real hook rather than its arithmetic alone: a mode's cost per step is
    also DDP's and the hook's own handling (bucket views, copies, the error
    feedback's buffers), which only running it shows."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from ringleader.runtime.comm import apply_mode
    from ringleader.runtime.modes import WARMUP_STEPS

    if threads:
        torch.set_num_threads(threads)
    if dist.is_initialized():
        raise RuntimeError("a process group is already initialized here")
    shape = input_shape or _input_shape(model)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        wrapped = DistributedDataParallel(model)
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        apply_mode(wrapped, mode, "gloo", optimizer)
        batch = torch.randn(batch_size, *shape, dtype=next(model.parameters()).dtype)
        times = []
        for i in range(WARMUP_STEPS + 2 + steps):
            start = time.perf_counter()
            out = wrapped(batch)
            out = out[0] if isinstance(out, (tuple, list)) else out
            out.float().square().mean().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if i >= WARMUP_STEPS + 2:
                times.append(time.perf_counter() - start)
    finally:
        dist.destroy_process_group()
    return statistics.median(times)

"""What a communication-efficient mode (``runtime.modes``) does to the planner's inputs.

Why its own module: ``plan --grad-compression MODE`` predicts a mode, and a plain
``plan`` of a communication-bound job recommends one; both need the share of the
gradient bytes a mode sends (``bytes_factor``), worked from the model's tensor
shapes the way torch's hooks decide:

* ``bf16`` / ``fp16``: every gradient cast to 2 bytes an element: factor
  ``2 / dtype bytes`` (0.5 of fp32; 1 for a model already in half precision);
* ``powersgd:R``: each gradient viewed as a matrix ``n x m`` (its first dimension
  by the rest) is sent as ``P`` (n x r) and ``Q`` (m x r), ``r = min(n, m, R)``,
  when that is less than half of ``n x m`` (torch's ``min_compression_rate`` 2);
  the others (biases, 1-D) are sent whole.  Without the shapes (``--params``), the
  parameters are *assumed* to be ``ASSUMED_SIDE`` x ``ASSUMED_SIDE`` matrices;
* ``sync_every H`` (local SGD): no gradient all-reduce; the parameters are
  averaged every H steps, in one buffer, after the optimizer (nothing overlaps
  it): ``Inputs.sync_every`` (the model divides that all-reduce by H).

PowerSGD sends three all-reduces per bucket (the uncompressed tensors, then P,
then Q, each waiting for the arithmetic before it), each paying the hops' latency,
and on gloo its buckets go one after another once backward has produced them
(``runtime.comm``): ``Inputs.collectives`` 3, ``Inputs.overlap`` False.  Its own
compute per step is timed: with ``--model`` a whole step under torch's hook on a
world of one (``measure.mode_step_s``) less the plain step; with ``--script`` its
arithmetic alone for the script's shapes (``powersgd_compute_s``).
Not modelled: its error feedback's memory.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ringleader.planner.model import Inputs, Prediction, recommend, with_bytes_factor
from ringleader.runtime.modes import CommMode

ASSUMED_SIDE = 1024  # --params only: gradients taken as square matrices of this side
MIN_COMPRESSION_RATE = 2  # torch's PowerSGDState default
RECOMMENDED = ("bf16", "powersgd:4")  # what a plain plan weighs for a comm-bound job
POWERSGD_COLLECTIVES = 3  # per bucket: the uncompressed tensors, P, Q

Shape = tuple[int, ...]


@dataclass(frozen=True)
class ModeCost:
    """A mode's effect on one step: the bytes factor, the extra compute (s), how
    the factor was found (``note``), and the accuracy caveat users should read."""

    mode: CommMode
    bytes_factor: float
    extra_compute_s: float
    note: str
    caveat: str

    @property
    def name(self) -> str:
        if self.mode.sync_every > 1:
            return f"--sync-every {self.mode.sync_every}"
        return f"--grad-compression {self.mode.compression_word()}"


def powersgd_elements(shapes: Sequence[Shape], rank: int) -> tuple[int, int]:
    """(elements sent, elements of the gradient) for PowerSGD rank ``rank``."""
    sent = total = 0
    for shape in shapes:
        n = shape[0] if shape else 1
        m = 1
        for side in shape[1:]:
            m *= side
        r = min(n, m, rank)
        compressed = (n + m) * r
        total += n * m
        sent += compressed if compressed * MIN_COMPRESSION_RATE < n * m else n * m
    return sent, total


def cost(mode: CommMode, dtype_bytes: int, shapes: Sequence[Shape] | None,
         extra_compute_s: float = 0.0) -> ModeCost:  # fmt: skip
    """``mode``'s bytes factor on a model of ``shapes`` (None: not known, assumed)."""
    if mode.sync_every > 1:
        h = mode.sync_every
        return ModeCost(mode, 1.0, 0.0, f"the parameters' all-reduce once every {h} steps",
                        "local SGD: ranks drift apart between averages; check accuracy"
                        " (more steps may be needed)")  # fmt: skip
    if mode.compression in ("bf16", "fp16"):
        factor = min(1.0, 2 / dtype_bytes)
        return ModeCost(mode, factor, 0.0, f"{2}/{dtype_bytes} bytes an element",
                        f"{mode.compression} all-reduce: close to exact")  # fmt: skip
    if mode.compression == "powersgd":
        caveat = (f"powersgd:{mode.rank} is lossy (error feedback corrects it over steps):"
                  " check accuracy; a higher rank is closer to exact")  # fmt: skip
        if shapes:
            sent, total = powersgd_elements(shapes, mode.rank)
            note = f"the model's {len(shapes)} tensors: {sent:,} of {total:,} elements sent"
        else:
            sent, total = powersgd_elements([(ASSUMED_SIDE, ASSUMED_SIDE)], mode.rank)
            note = (f"assumed: {ASSUMED_SIDE}x{ASSUMED_SIDE} matrices (--params gives no"
                    " shapes; --model counts them)")  # fmt: skip
        return ModeCost(mode, sent / total, extra_compute_s, note, caveat)
    return ModeCost(mode, 1.0, 0.0, "exact", "exact DDP")


def apply(inputs: Inputs, found: ModeCost) -> Inputs:
    """The job's inputs under the mode: fewer bytes, its own compute, or local SGD."""
    if found.mode.sync_every > 1:
        return replace(inputs, sync_every=found.mode.sync_every)
    job = with_bytes_factor(inputs, found.bytes_factor)
    job = replace(job, other_s=job.other_s + found.extra_compute_s)
    if found.mode.compression == "powersgd":
        job = replace(job, collectives=POWERSGD_COLLECTIVES, overlap=False)
    return job


def powersgd_compute_s(shapes: Sequence[Shape], rank: int, repeats: int = 3) -> float:
    """PowerSGD's arithmetic for one step, timed here: for each compressed matrix M,
    P = M Q, P orthogonalized, Q = M^T P, M's approximation P Q^T and the error
    kept for feedback (what ``powerSGD_hook`` computes; the median of ``repeats``)."""
    import torch

    matrices = []
    for shape in shapes:
        n = shape[0] if shape else 1
        m = max(1, int(torch.Size(shape[1:]).numel())) if len(shape) > 1 else 1
        r = min(n, m, rank)
        if (n + m) * r * MIN_COMPRESSION_RATE < n * m:
            matrices.append((torch.randn(n, m), torch.randn(m, r)))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for grad, q in matrices:
            p = torch.linalg.qr(grad @ q).Q
            q = grad.T @ p
            grad.sub_(p @ q.T)  # the error feedback's residual
        times.append(time.perf_counter() - start)
    return statistics.median(times) if times else 0.0


def bound_at(predictions: Sequence[Prediction], found_ranks: int | None) -> Prediction | None:
    """The N a recommendation is for: the knee's when communication bounds it there,
    else the largest N when communication bounds that; None for a compute-bound job."""
    at = {p.ranks: p for p in predictions}
    for n in (found_ranks, predictions[-1].ranks):
        if n is not None and n > 1 and at[n].bound == "communication":
            return at[n]
    return None


def advise(
    inputs: Inputs, predictions: Sequence[Prediction], found_ranks: int | None,
    costs: Sequence[ModeCost],
) -> dict[str, Any] | None:  # fmt: skip
    """The mode to try, as plain data (``--json``'s ``recommendation``), or None when
    the job is compute-bound or no mode is predicted faster (``model.recommend``)."""
    exact = bound_at(predictions, found_ranks)
    if exact is None:
        return None
    by_name = {c.mode.compression_word(): c for c in costs}
    chosen = recommend(inputs, exact.ranks, {k: apply(inputs, c) for k, c in by_name.items()})
    if chosen is None:
        return None
    picked = by_name[chosen[0]]
    return {
        "ranks": exact.ranks, "flag": picked.name, "bytes_factor": picked.bytes_factor,
        "extra_compute_s": picked.extra_compute_s, "note": picked.note,
        "caveat": picked.caveat, "samples_per_s": chosen[1].samples_per_s,
        "exact_samples_per_s": exact.samples_per_s,
        "gain": chosen[1].samples_per_s / exact.samples_per_s,
        "efficiency": chosen[1].efficiency,
    }  # fmt: skip


def advice_text(advice: dict[str, Any]) -> str:
    """The sentence under the table."""
    return (
        f"communication-bound at N={advice['ranks']}: try {advice['flag']} (predicted"
        f" {advice['samples_per_s']:,.4g} samples/s, {advice['gain']:.3g}x the exact"
        f" all-reduce's {advice['exact_samples_per_s']:,.4g}; bytes x{advice['bytes_factor']:.3g},"
        f" {advice['note']}); {advice['caveat']}"
    )

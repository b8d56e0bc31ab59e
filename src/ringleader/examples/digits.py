"""Data-parallel training of a small CNN on scikit-learn's bundled 8x8 digits.

Run it as ``python -m ringleader.examples.digits`` alone (a world of one) or under
a launcher (``ringleader``, torchrun, srun, mpirun).  Needs no network: the data
ships with scikit-learn.

Nomenclature: *per-rank batch* is ``--batch-size``; the *global batch* is
``world_size`` times that.  A *step* is one optimizer step, taken in lock step by
all ranks.

Invariants the tests rely on:

* With ``--no-shuffle``, W ranks with batch b and one rank with batch W*b take the
  same steps on the same samples and end with the same parameters (up to float
  rounding): DistributedSampler hands rank r the samples r, r+W, r+2W, ..., so
  global batch k is samples k*W*b .. (k+1)*W*b-1 either way; DDP averages the
  per-rank mean gradients, which is the mean over the global batch; the last
  partial batch is dropped; and the model has no BatchNorm/Dropout, whose
  per-rank statistics or randomness would break the equality.  (The step counts
  agree when ceil(N/W) // b == N // (W*b), true for the 1437 training samples and
  W*b = 32.)
* Every rank takes the same number of steps (DistributedSampler pads the shards to
  equal length), so DDP's collectives never hang.

Output (rank 0 only, stdout, in this order; the ``RINGLEADER_BENCH`` lines only
with ``--bench``, which ``bench/`` passes: a user's log shows the training alone)::

    RINGLEADER_BENCH first_step_unix=1712345678.123456
    epoch 1/10: train loss 1.2345
    ...
    RINGLEADER_BENCH steady_steps_per_s=212.345 steps=222
    final test accuracy: 0.9722

``first_step_unix`` is ``time.time()`` right after the first optimizer step (for
launch-to-first-step latency).  ``steady_steps_per_s`` is ``steps`` divided by the
time from the end of step 2 (warm-up) to the end of the last step, ``steps`` being
the total minus the 2 warm-up steps (``nan`` with ``steps=0`` when there were none).
The epoch loss is the sample-weighted mean over all ranks.  Every rank reports each
step's loss and samples with ``runtime.report`` (the server's metrics; no output).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ringleader import runtime

#: Steps excluded from the steady-state rate (allocator warm-up, DDP bucket rebuild).
WARMUP_STEPS = 2


class Data(NamedTuple):
    """Standardised images (N, 1, 8, 8) float32 and labels (N,) int64."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


@dataclass
class Config:
    """Hyper-parameters; the defaults reach >= 0.95 test accuracy with 1 or 2 ranks."""

    epochs: int = 10
    batch_size: int = 32
    lr: float = 0.02
    momentum: float = 0.9
    seed: int = 0
    shuffle: bool = True
    max_steps: int | None = None
    save_params: str | None = None
    checkpoint: bool = True  # save each epoch, resume from the last (RINGLEADER_CHECKPOINT_DIR)
    bench: bool = False  # print the RINGLEADER_BENCH lines benchmarks parse


@dataclass
class Result:
    """What ``train`` measured; ``accuracy`` is over the whole test set."""

    accuracy: float
    steps: int
    epoch_losses: list[float] = field(default_factory=list)
    first_step_unix: float | None = None
    steady_steps_per_s: float = float("nan")  # nan when there were no post-warm-up steps


def load_data(seed: int = 0) -> Data:
    """Deterministic stratified 80/20 split, standardised with the training set's statistics."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x_tr, x_te, y_tr, y_te = train_test_split(
        digits.data, digits.target, test_size=0.2, random_state=seed, stratify=digits.target
    )
    mean, std = x_tr.mean(axis=0), x_tr.std(axis=0) + 1e-6  # some border pixels are always 0

    def images(x: np.ndarray) -> torch.Tensor:  # (N, 64) -> (N, 1, 8, 8)
        return torch.tensor((x - mean) / std, dtype=torch.float32).reshape(-1, 1, 8, 8)

    def labels(y: np.ndarray) -> torch.Tensor:
        return torch.tensor(y, dtype=torch.int64)

    return Data(images(x_tr), labels(y_tr), images(x_te), labels(y_te))


def build_model(seed: int = 0) -> nn.Module:
    """A small CNN; seeded so every rank (and every run) starts from the same weights."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def _sum_across_ranks(*values: float) -> list[float]:
    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor)
    return tensor.tolist()


@torch.no_grad()
def evaluate(model: nn.Module, data: Data, ctx: runtime.DistContext) -> float:
    """Accuracy on the full test set: each rank scores a disjoint slice, no padding."""
    x = data.x_test[ctx.rank :: ctx.world_size].to(ctx.device)
    y = data.y_test[ctx.rank :: ctx.world_size].to(ctx.device)
    correct = (model(x).argmax(dim=1) == y).sum().item() if len(y) else 0
    total_correct, total = _sum_across_ranks(correct, len(y))
    return total_correct / total


def train(cfg: Config, ctx: runtime.DistContext, out: Callable[[str], None] = print) -> Result:
    """Train with DDP on ``ctx`` and return the test accuracy; rank 0 reports via ``out``."""
    main = ctx.rank == 0
    data = load_data(cfg.seed)
    model = runtime.prepare(build_model(cfg.seed))
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    train_set = TensorDataset(data.x_train, data.y_train)
    sampler = runtime.shard(train_set, shuffle=cfg.shuffle, seed=cfg.seed)
    loader = DataLoader(train_set, batch_size=cfg.batch_size, sampler=sampler, drop_last=True)
    loss_fn = nn.CrossEntropyLoss()
    result = Result(accuracy=0.0, steps=0)
    steady_start = None
    start = 0
    saved = runtime.load_checkpoint() if cfg.checkpoint else None
    if saved is not None:  # restarted, preempted or resumed: go on from the last epoch saved
        model.module.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        start, result.epoch_losses = saved["epoch"] + 1, list(saved["epoch_losses"])
        if main:
            out(f"resumed from the checkpoint of epoch {start}/{cfg.epochs}")
    for epoch in range(start, cfg.epochs):
        sampler.set_epoch(epoch)
        loss_sum, seen = 0.0, 0
        for x, y in loader:
            x, y = x.to(ctx.device), y.to(ctx.device)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            result.steps += 1
            step_loss = loss.item()
            loss_sum, seen = loss_sum + step_loss * len(y), seen + len(y)
            # Charted by the server (GET .../metrics); a no-op outside ringleader.
            runtime.report(result.steps, loss=step_loss, samples=len(y), epoch=epoch + 1)
            if result.steps == 1:
                result.first_step_unix = time.time()
                if main and cfg.bench:
                    out(f"RINGLEADER_BENCH first_step_unix={result.first_step_unix:.6f}")
            if result.steps == WARMUP_STEPS:
                steady_start = time.perf_counter()
            if cfg.max_steps is not None and result.steps >= cfg.max_steps:
                break
        total_loss, total_seen = _sum_across_ranks(loss_sum, seen)
        result.epoch_losses.append(total_loss / max(total_seen, 1))
        if main:
            out(f"epoch {epoch + 1}/{cfg.epochs}: train loss {result.epoch_losses[-1]:.4f}")
        if cfg.checkpoint:
            state = {
                "epoch": epoch,
                "model": model.module.state_dict(),
                "optimizer": optimizer.state_dict(),
                "epoch_losses": result.epoch_losses,
            }
            runtime.save_checkpoint(state)
        if cfg.max_steps is not None and result.steps >= cfg.max_steps:
            break
    steady_steps = max(result.steps - WARMUP_STEPS, 0)
    if steady_start is not None and steady_steps:
        result.steady_steps_per_s = steady_steps / (time.perf_counter() - steady_start)
    if main and cfg.bench:
        out(
            f"RINGLEADER_BENCH steady_steps_per_s={result.steady_steps_per_s:.3f} "
            f"steps={steady_steps}"
        )
    result.accuracy = evaluate(model, data, ctx)
    if main:
        out(f"final test accuracy: {result.accuracy:.4f}")
        if cfg.save_params:
            torch.save(model.module.state_dict(), cfg.save_params)
    return result


def parse_args(argv: list[str] | None = None) -> Config:
    """Command-line flags onto a :class:`Config` (``--batch-size`` is per rank)."""
    d = Config()
    p = argparse.ArgumentParser(prog="python -m ringleader.examples.digits", description=__doc__)
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="per rank")
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--save-params", metavar="PATH", help="rank 0 torch.save()s the state_dict")
    p.add_argument("--no-shuffle", action="store_true", help="fixed data order (for tests)")
    p.add_argument("--max-steps", type=int, help="stop after this many optimizer steps")
    p.add_argument(
        "--no-checkpoint", action="store_true", help="neither save nor resume from checkpoints"
    )
    p.add_argument(
        "--bench", action="store_true", help="print the RINGLEADER_BENCH timing lines (bench/)"
    )
    a = p.parse_args(argv)
    return Config(
        epochs=a.epochs,
        batch_size=a.batch_size,
        lr=a.lr,
        seed=a.seed,
        shuffle=not a.no_shuffle,
        max_steps=a.max_steps,
        save_params=a.save_params,
        checkpoint=not a.no_checkpoint,
        bench=a.bench,
    )


def _set_threads() -> None:
    """Use OMP_NUM_THREADS (set by the launcher); else share the cores among local ranks."""
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
        return
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(local, 1)))


@runtime.record
def main(argv: list[str] | None = None) -> int:
    """Entry point; ``@record`` so a crash reaches the launcher as an error file."""
    cfg = parse_args(argv)
    _set_threads()
    ctx = runtime.init()
    try:
        train(cfg, ctx, out=lambda line: print(line, flush=True))
    finally:
        runtime.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

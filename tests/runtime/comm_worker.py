"""One rank of tests/runtime/test_comm_modes.py: train a small MLP for a few steps.

COMM_TEST_ARGS is JSON: ``{"mode": "plain"}`` (torch's DDP, no ringleader) or the keyword
arguments of ``runtime.prepare`` (``{}``: from the environment), plus ``steps``.
Prints one JSON line: the parameters' bytes' digest, the first and last loss,
the metrics records this rank wrote.
"""

from __future__ import annotations

import hashlib
import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ringleader import runtime


def data(rank: int, n: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """A separable problem, a different shard per rank (a fixed teacher)."""
    teacher = torch.Generator().manual_seed(7)
    weights = torch.randn(32, 4, generator=teacher)
    gen = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(n, 32, generator=gen)
    return x, (x @ weights).argmax(dim=1)


def main() -> None:
    args = json.loads(os.environ["COMM_TEST_ARGS"])
    steps = args.pop("steps", 40)
    use_optimizer = args.pop("optimizer", True)
    ctx = runtime.init(timeout_s=60)
    torch.manual_seed(0)
    width = args.pop("width", 64)  # 1024: 1.1M parameters, several DDP buckets
    model = torch.nn.Sequential(
        torch.nn.Linear(32, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
        torch.nn.ReLU(), torch.nn.Linear(width, 4),
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if args.get("mode") == "plain":
        wrapped = DistributedDataParallel(model)
    elif use_optimizer:
        wrapped, optimizer = runtime.prepare(model, optimizer, **args)
    else:
        wrapped = runtime.prepare(model, **args)
    x, y = data(ctx.rank)
    losses = []
    for step in range(steps):
        batch = slice((step * 32) % 256, (step * 32) % 256 + 32)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(wrapped(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        runtime.report(step, loss=loss.item(), samples=32)
    with torch.no_grad():  # the whole shard, every rank's own copy of the model
        full = torch.nn.functional.cross_entropy(model(x), y).item()
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        gathered = [torch.zeros_like(flat) for _ in range(ctx.world_size)]
        dist.all_gather(gathered, flat)
    print(json.dumps({
        "rank": ctx.rank,
        "digest": hashlib.sha256(flat.numpy().tobytes()).hexdigest(),
        "spread": max((g - flat).abs().max().item() for g in gathered),
        "first": losses[0], "last": full,
    }), flush=True)  # fmt: skip
    runtime.shutdown()


if __name__ == "__main__":
    main()

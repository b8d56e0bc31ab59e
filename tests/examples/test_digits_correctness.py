"""Data parallelism must not change the maths: 2 ranks x batch 16 == 1 rank x batch 32.

With ``--no-shuffle``, DistributedSampler interleaves the samples (rank r gets r,
r+2, r+4, ...), so each global batch of 32 is the same 32 samples either way, and
DDP's gradient average equals the single-rank batch mean.  Any difference beyond
float rounding means gradients are not averaged (or ranks never met).

The ranks are started by the real launcher (``ringleader launch``) in :func:`run_ranks`.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ringleader.examples.digits import build_model
from tests.helpers.launched import run_ranks


def _steps(stdout: str) -> int:
    match = re.search(r"^RINGLEADER_BENCH steady_steps_per_s=\S+ steps=(\d+)$", stdout, re.M)
    assert match, stdout
    return int(match.group(1))


def test_two_ranks_match_one_rank_with_the_global_batch(tmp_path: Path) -> None:
    common = ["--no-shuffle", "--epochs", "2", "--seed", "3", "--bench"]
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    (single,) = run_ranks(1, [*common, "--batch-size", "32", "--save-params", str(one)])
    rank0, rank1 = run_ranks(2, [*common, "--batch-size", "16", "--save-params", str(two)])

    assert _steps(single.stdout) == _steps(rank0.stdout) == 2 * (1437 // 32) - 2
    assert "RINGLEADER_BENCH" not in rank1.stdout  # rank 0 reports for everybody
    params_one = torch.load(one, weights_only=True)
    params_two = torch.load(two, weights_only=True)
    initial = build_model(3).state_dict()
    assert params_one.keys() == params_two.keys() == initial.keys()
    for name, value in params_one.items():
        assert torch.allclose(value, params_two[name], rtol=1e-4, atol=1e-6), name
    # Not vacuous: training moved the weights far beyond the tolerance.
    moved = max((params_one[k] - initial[k]).abs().max().item() for k in initial)
    assert moved > 1e-2

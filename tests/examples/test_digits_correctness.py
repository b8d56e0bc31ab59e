"""Data parallelism must not change the maths: 2 ranks x batch 16 == 1 rank x batch 32.

With ``--no-shuffle``, DistributedSampler interleaves the samples (rank r gets r,
r+2, r+4, ...), so each global batch of 32 is the same 32 samples either way, and
DDP's gradient average equals the single-rank batch mean.  Any difference beyond
float rounding means gradients are not averaged (or ranks never met).

The ranks are started by the real launcher (``ringleader launch``) in :func:`_run_ranks`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from ringleader.examples.digits import build_model

TIMEOUT_S = 120
_LAUNCHER_PREFIXES = ("RINGLEADER_", "SLURM_", "OMPI_", "PMIX_", "PET_", "TORCHELASTIC_")
_LAUNCHER_NAMES = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK"}
_LAUNCHER_NAMES |= {"NODE_RANK", "NNODES", "MASTER_ADDR", "MASTER_PORT"}


def _run_ranks(
    n: int, argv: list[str], module: str = "ringleader.examples.digits"
) -> list[subprocess.CompletedProcess[str]]:
    """Run ``python -m module argv`` as ``n`` ranks through ``ringleader launch``.

    Each rank's own stdout/stderr come back from the launcher's ``--log-dir``
    files, so callers see exactly what that rank printed (no prefixes).
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _LAUNCHER_NAMES and not k.startswith(_LAUNCHER_PREFIXES)
    }
    with tempfile.TemporaryDirectory() as logs:
        launcher = subprocess.run(
            [
                sys.executable,
                "-m",
                "ringleader",
                "launch",
                "-n",
                str(n),
                "--log-dir",
                logs,
                "--",
                sys.executable,
                "-m",
                module,
                *argv,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert launcher.returncode == 0, f"launch failed:\n{launcher.stderr}"
        results = []
        for r in range(n):
            files = [Path(logs) / "attempt-0" / f"rank-{r}.{s}" for s in ("stdout", "stderr")]
            out, err = (f.read_text() if f.exists() else "" for f in files)
            results.append(subprocess.CompletedProcess(launcher.args, 0, out, err))
    return results


def _steps(stdout: str) -> int:
    match = re.search(r"^RINGLEADER_BENCH steady_steps_per_s=\S+ steps=(\d+)$", stdout, re.M)
    assert match, stdout
    return int(match.group(1))


def test_two_ranks_match_one_rank_with_the_global_batch(tmp_path: Path) -> None:
    common = ["--no-shuffle", "--epochs", "2", "--seed", "3", "--bench"]
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    (single,) = _run_ranks(1, [*common, "--batch-size", "32", "--save-params", str(one)])
    rank0, rank1 = _run_ranks(2, [*common, "--batch-size", "16", "--save-params", str(two)])

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

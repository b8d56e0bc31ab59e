"""Ranks run through the real launcher (``ringleader launch``) for the examples' tests,
with the environment a launcher would leave behind taken out first."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

TIMEOUT_S = 120
LAUNCHER_PREFIXES = ("RINGLEADER_", "SLURM_", "OMPI_", "PMIX_", "PET_", "TORCHELASTIC_")
LAUNCHER_NAMES = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK"}
LAUNCHER_NAMES |= {"NODE_RANK", "NNODES", "MASTER_ADDR", "MASTER_PORT"}


def run_ranks(
    n: int, argv: list[str], module: str = "ringleader.examples.digits"
) -> list[subprocess.CompletedProcess[str]]:
    """Run ``python -m module argv`` as ``n`` ranks through ``ringleader launch``.

    Each rank's own stdout/stderr come back from the launcher's ``--log-dir``
    files, so callers see exactly what that rank printed (no prefixes).
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in LAUNCHER_NAMES and not k.startswith(LAUNCHER_PREFIXES)
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

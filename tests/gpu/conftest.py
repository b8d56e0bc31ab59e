"""GPU tests: real CUDA devices, real NCCL, real launches; no mocks.

Every test here is skipped unless this machine has a CUDA GPU: torch must
see one (``torch.cuda.is_available()``; the CPU build of torch that ``make
setup`` installs by default never does) and ``nvidia-smi`` must be on PATH
(the server's inventory and the probes read devices through it). The skip
holds even with ``CI=true``, unlike the suite's other environment skips
(PostgreSQL, test hosts), which fail under CI: CI machines have no GPU, and a
GPU run is asked for by name with ``make test-gpu`` on a machine that has one.

``pytest`` collects this directory with the rest of ``tests/``, so these
tests stay importable and lint-clean everywhere; they skip in a second.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# ``server``: a real ``ringleader server`` process; its local node has this machine's GPUs.
from tests.server.conftest import server  # noqa: F401


def cuda_devices() -> int:
    """CUDA devices torch sees here (0 without torch's CUDA build or a driver).

    Without nvidia-smi there is no driver to ask: torch is not even imported,
    so the skip costs nothing on machines without a GPU.
    """
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def why_no_gpu() -> str | None:
    """Why GPU tests cannot run here, or None when they can."""
    if shutil.which("nvidia-smi") is None:
        return "no nvidia-smi on PATH"
    if cuda_devices() == 0:
        return "torch sees no CUDA device (a CPU build of torch, or no driver)"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip every test of this directory without a GPU (CI=true included)."""
    reason = why_no_gpu()
    if reason is None:
        return
    here = Path(__file__).parent
    mark = pytest.mark.skip(reason=f"needs a CUDA GPU: {reason}")
    for item in items:
        if here in item.path.parents:
            item.add_marker(mark)


needs_two_gpus = pytest.mark.skipif(
    cuda_devices() < 2, reason="needs 2 CUDA GPUs (NCCL refuses two ranks on one device)"
)


def run_script(
    tmp_path: Path, name: str, source: str, *argv: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """``ringleader ARGV... -- python SCRIPT``: the script is written to ``tmp_path``."""
    script = tmp_path / name
    script.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "ringleader", *argv, "--", sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )

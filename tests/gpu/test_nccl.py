"""NCCL through ``ringleader launch``: the runtime picks NCCL when each rank can
have a device of its own, and an allreduce on the devices gives the sum."""

from __future__ import annotations

from pathlib import Path

from tests.gpu.conftest import needs_two_gpus, run_script

ALLREDUCE = """
import torch
import torch.distributed as dist
from ringleader.runtime import init

ctx = init()
assert ctx.backend == "nccl", ctx.backend
assert ctx.device.type == "cuda", ctx.device
value = torch.full((1024,), float(ctx.rank + 1), device=ctx.device)
dist.all_reduce(value)
torch.cuda.synchronize()
print(f"rank {ctx.rank} on {torch.cuda.get_device_name(ctx.device)} "
      f"device {ctx.device.index}: sum={value[0].item():g}", flush=True)
dist.destroy_process_group()
"""


def _sums(output: str) -> list[float]:
    return [float(line.rsplit("sum=", 1)[1]) for line in output.splitlines() if "sum=" in line]


@needs_two_gpus
def test_nccl_allreduce_across_two_ranks_on_two_devices(tmp_path: Path) -> None:
    done = run_script(tmp_path, "allreduce.py", ALLREDUCE, "launch", "-n", "2")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert _sums(output) == [3.0, 3.0], output  # 1 + 2 on both ranks
    devices = {
        line.split("device ")[1].split(":")[0] for line in output.splitlines() if "sum=" in line
    }
    assert devices == {"0", "1"}, output  # a device of its own per rank


def test_nccl_initialises_and_allreduces_on_one_rank(tmp_path: Path) -> None:
    done = run_script(tmp_path, "allreduce.py", ALLREDUCE, "launch", "-n", "1")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert _sums(output) == [1.0], output

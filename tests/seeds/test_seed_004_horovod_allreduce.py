"""Seed 004 ("Distributed Training of a Single Machine Learning Model"): what it describes.

The seed is an article, not a walkthrough one can type here: its one command block,
``cd ~/SageMaker`` and ``git clone https://github.com/data-science-on-aws/kubeflow.git``,
needs an Amazon SageMaker notebook instance and the internet, and its EKS/KubeFlow
section is empty. Nothing in it is a ringleader command, so nothing is typed as printed.

What it describes, and ringleader does: Horovod-style data-parallel training — each
node computes the gradient of its share of the data, an allreduce averages the
gradients, and every node applies the same averaged gradient, so all nodes keep the
same weights as one model trained on all the data. Here two network-namespace hosts
with real sshd, started Horovod's way (``ringleader launch -H a:1,b:1``, one rank per
host), run that loop with PyTorch's gloo allreduce; every rank must end with exactly
the weights of full-batch gradient descent computed here in one process. The figure
the article gives, each rank moving 2(N-1)K/N bytes per allreduce, is the "bytes"
column of ``ringleader doctor``'s bandwidth table (tested in tests/cluster/test_doctor.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.fixtures.testhosts import TestHostNetwork, require_test_hosts
from tests.seeds.usershell import UserShell, user_path

pytestmark = pytest.mark.multihost

STEPS, LR, ROWS = 25, 0.1, 64
TRUE_WEIGHTS = (1.0, -2.0, 3.0, 0.5)
SGD = f"""\
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.randn({ROWS}, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
y = x @ torch.tensor({TRUE_WEIGHTS}, dtype=torch.float64)
mine = slice(rank * {ROWS} // world, (rank + 1) * {ROWS} // world)  # this rank's shard
w = torch.zeros(4, dtype=torch.float64)
for step in range({STEPS}):
    xs, ys = x[mine], y[mine]
    grad = 2 * xs.T @ (xs @ w - ys) / len(ys)  # the gradient of its own shard only
    dist.all_reduce(grad)  # summed over the ranks...
    grad /= world  # ...and averaged, as Horovod's allreduce does
    w -= {LR} * grad
print("weights", " ".join(f"{{v:.12f}}" for v in w.tolist()), flush=True)
dist.destroy_process_group()
"""


def full_batch_weights() -> list[float]:
    """One process, all the data: what every rank of the gang must reach."""
    x = torch.randn(ROWS, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = x @ torch.tensor(TRUE_WEIGHTS, dtype=torch.float64)
    w = torch.zeros(4, dtype=torch.float64)
    for _ in range(STEPS):
        w -= LR * (2 * x.T @ (x @ w - y) / ROWS)
    return w.tolist()


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestHostNetwork, Path]]:
    require_test_hosts()
    workdir = tmp_path_factory.mktemp("seed004")
    (workdir / "sgd.py").write_text(SGD)
    with TestHostNetwork(2) as net:
        yield net, workdir


def test_horovod_style_launch_averages_the_gradients_across_hosts(
    two_hosts: tuple[TestHostNetwork, Path],
) -> None:
    net, workdir = two_hosts
    shell = UserShell(workdir, {"PATH": user_path(), "RINGLEADER_SSH_CONFIG": str(net.ssh_config),
                                "HOME": str(workdir)})  # fmt: skip
    a, b = (h.address for h in net.hosts)
    done = shell.paste(f"ringleader launch -H {a}:1,{b}:1 -- python sgd.py", timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.findall(r"^\[(\d)/2 (\S+)\] weights (.*)$", done.stdout, re.M)
    assert sorted((rank, host) for rank, host, _ in found) == [("0", a), ("1", b)], done.stdout
    expected = full_batch_weights()
    assert max(abs(e - t) for e, t in zip(expected, TRUE_WEIGHTS, strict=True)) < 0.05  # it learnt
    for _, _, weights in found:
        got = [float(v) for v in weights.split()]
        assert got == pytest.approx(expected, abs=1e-9), (got, expected)

"""Seed 003 (an MLX project's "Distributed Training Guide") on three network-namespace
hosts with real sshd, its commands typed with ringleader in place of the guide's mpirun
and shell scripts.

The guide's pieces and what stands for them:

- ``hosts.json`` with 3 nodes: MLX's form, ``[{"ssh": ADDRESS, "ips": [ADDRESS]}]``;
  "/Users/mm/mlx-project" is a directory of this test, not yet on the third host;
- "The script will automatically convert hosts.json to the proper MPI format":
  ``ringleader hostfile hosts.json -o hostfile`` writes exactly the guide's
  ``ADDRESS slots=1`` lines;
- "Troubleshooting" (SSH access, the code at the same path, the working directory):
  ``ringleader doctor`` names the host without the code; "Code Sync"
  (``sync_to_mlx_project.sh`` / rsync): ``ringleader sync``; then doctor passes;
- "Verify Distributed Setup": ``mpirun --hostfile hostfile -np 3 hostname`` and
  ``... python3 --version`` -> ``ringleader launch --framework mpi --hostfile hostfile
  -n 3 -- ...``: one answer per host (the hosts share this machine's name, so the
  ``[r/3 ADDRESS]`` prefix tells them apart);
- the training, ``train_homeassistant.py`` (here MLX's distributed hello world: an
  ``all_sum`` over the ranks printing the guide's ``[Rank r/3]``): with hosts.json
  (``ringleader launch --hostfile hosts.json -- python3 ...``, MLX's ring backend)
  and as Option 2, ``mpirun --hostfile hostfile -np 3 python3 ... --distributed``
  (``--framework mpi``): one world of 3 either way, "[Rank 0/3] - Main node" ...

The user's ``~/.ssh/config`` is the test hosts' (``RINGLEADER_SSH_CONFIG``: their
host keys and identity). Option 1 and the Quick Setup run
the guide's own shell scripts, which it does not print; Option 3 is one process.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import require
from tests.fixtures.testhosts import TestHostNetwork, require_test_hosts
from tests.seeds.usershell import UserShell, user_path

pytestmark = [pytest.mark.multihost, pytest.mark.usefixtures("mpirun_available")]

TRAIN = """\
import sys
import mlx.core as mx

world = mx.distributed.init(strict="--distributed" in sys.argv)
total = mx.distributed.all_sum(mx.array([float(world.rank() + 1)]))
print(f"[Rank {world.rank()}/{world.size()}] all_sum {total.item():g}", flush=True)
"""


@dataclass
class Guide(UserShell):
    net: TestHostNetwork | None = None

    @property
    def hosts(self) -> TestHostNetwork:
        assert self.net is not None
        return self.net

    def typed(self, line: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        done = self.paste(line, timeout=timeout)
        assert "Traceback" not in done.stderr, done.stderr
        return done


@pytest.fixture(scope="module")
def guide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guide]:
    require_test_hosts()
    require(importlib.util.find_spec("mlx") is not None, "mlx (pip install 'mlx[cpu]')")
    project = tmp_path_factory.mktemp("seed003") / "mlx-project"
    project.mkdir()
    with TestHostNetwork(3, hidden_dirs={2: [project]}) as net:
        (project / "train_homeassistant.py").write_text(TRAIN)
        hosts = [{"ssh": h.address, "ips": [h.address]} for h in net.hosts]
        (project / "hosts.json").write_text(json.dumps(hosts, indent=2) + "\n")
        env = {"PATH": user_path(), "RINGLEADER_SSH_CONFIG": str(net.ssh_config),
               "HOME": str(project.parent), "COLUMNS": "80"}  # fmt: skip
        yield Guide(project, env, net)


def lines_of(done: subprocess.CompletedProcess[str], pattern: str) -> list[tuple[str, ...]]:
    return re.findall(pattern, done.stdout, re.M)


def test_hostfile_doctor_sync_and_the_verify_commands(guide: Guide) -> None:
    net = guide.hosts
    made = guide.typed("ringleader hostfile hosts.json -o hostfile")
    assert made.returncode == 0, made.stderr
    expected = "".join(f"{h.address} slots=1\n" for h in net.hosts)  # "Hostfile Format"
    assert (guide.workdir / "hostfile").read_text() == expected

    # ./hosts.json; the bus-bandwidth run (tests/cluster/test_doctor.py's) left out
    doctor = "ringleader doctor --min-free-gb 0.01 --no-bandwidth"
    first = guide.typed(doctor)
    assert first.returncode == 1, first.stdout
    missing = net.hosts[2].address
    said = " ".join(first.stdout.split())  # as one line, whatever the wrapping at 80 columns
    assert f"{missing} workdir: {guide.workdir} is missing" in said, first.stdout
    assert "fix: `ringleader sync`" in said, first.stdout
    synced = guide.typed("ringleader sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    second = guide.typed(doctor)
    assert second.returncode == 0 and "all 3 hosts ready" in second.stdout, second.stdout

    verify = "ringleader launch --framework mpi --hostfile hostfile -n 3"
    named = guide.typed(f"{verify} -- hostname")
    assert named.returncode == 0, named.stderr[-3000:]
    answered = lines_of(named, r"^\[(\d)/3 (\S+)\] \S+$")
    assert sorted(answered) == [(str(h.index), h.address) for h in net.hosts], named.stdout
    version = guide.typed(f"{verify} -- python3 --version")
    assert version.returncode == 0, version.stderr[-3000:]
    assert len(lines_of(version, r"^\[\d/3 \S+\] Python 3\.\d+\.\d+$")) == 3, version.stdout


def test_training_on_the_three_hosts_with_hosts_json_and_with_mpirun(guide: Guide) -> None:
    net = guide.hosts
    assert guide.typed("ringleader sync").returncode == 0  # the code on every host
    ring = guide.typed("ringleader launch --hostfile hosts.json -- python3 train_homeassistant.py")
    assert ring.returncode == 0, ring.stderr[-3000:]
    for h in net.hosts:  # "[Rank 0/3] - Main node", "[Rank 1/3] - Second node", ...
        assert f"[{h.index}/3 {h.address}] [Rank {h.index}/3] all_sum 6" in ring.stdout, ring.stdout

    if not (guide.workdir / "hostfile").exists():  # this test alone
        assert guide.typed("ringleader hostfile hosts.json -o hostfile").returncode == 0
    option_2 = "ringleader launch --framework mpi --hostfile hostfile -n 3 -- python3 "
    option_2 += "train_homeassistant.py --distributed"
    mpi = guide.typed(option_2)
    assert mpi.returncode == 0, mpi.stderr[-3000:]
    ranks = lines_of(mpi, r"^\[(\d)/3 (\S+)\] \[Rank (\d)/3\] all_sum 6$")
    assert sorted(ranks) == [(str(h.index), h.address, str(h.index)) for h in net.hosts], mpi

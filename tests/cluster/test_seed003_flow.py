"""Seed 003's guide, end to end with ringleader: hosts.json with 3 hosts -> doctor
(finds the host without the code) -> sync -> doctor passes -> launch, every line
prefixed with its rank out of 3."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import launch
from tests.fixtures.testhosts import (  # noqa: F401  (provides the `make_test_hosts` fixture)
    TestHostNetwork,
    make_test_hosts_fixture,
)

TRAIN = """\
import os, socket
import torch.distributed as dist
dist.init_process_group("gloo")
t = __import__("torch").tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} on {os.environ['RINGLEADER_NODE_IPS'].split()[dist.get_rank()]}: sum {t.item():g}")
dist.destroy_process_group()
"""


def test_hosts_json_doctor_sync_launch(make_test_hosts, tmp_path: Path) -> None:
    code = tmp_path / "homeassistant"
    code.mkdir()
    (code / "train_homeassistant.py").write_text(TRAIN)
    net: TestHostNetwork = make_test_hosts(3, hidden_dirs={2: [code]})
    hosts = code / "hosts.json"
    hosts.write_text(json.dumps([{"ssh": h.address, "ips": [h.address]} for h in net.hosts]))
    base = [sys.executable, "-m", "ringleader"]
    ssh = ["--ssh-config", str(net.ssh_config)]

    def doctor() -> subprocess.CompletedProcess[str]:
        argv = [*base, "doctor", *ssh, "--min-free-gb", "0.01"]  # ./hosts.json, ./ as workdir
        return subprocess.run(argv, cwd=code, capture_output=True, text=True, timeout=120)

    first = doctor()
    assert first.returncode == 1
    assert re.search(rf"{re.escape(net.hosts[2].address)} workdir: .* is missing", first.stdout)
    synced = subprocess.run([*base, "sync", *ssh], cwd=code, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert synced.returncode == 0, synced.stdout + synced.stderr
    second = doctor()
    assert second.returncode == 0, second.stdout
    assert "all 3 hosts ready" in second.stdout

    done = launch("--hostfile", str(hosts), *ssh, "--", "python", "train_homeassistant.py",
                  cwd=code, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for h in net.hosts:
        line = f"[{h.index}/3 {h.address}] rank {h.index} of 3 on {h.address}: sum 6"
        assert line in done.stdout, done.stdout

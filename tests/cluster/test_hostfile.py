"""``ringleader hostfile``: hosts.json -> MPI hostfile, as seed 003 does by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def hostfile(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ringleader", "hostfile", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_hosts_json_becomes_an_mpi_hostfile(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.json"
    hosts.write_text(
        '[{"ssh": "mini-1", "ips": ["10.85.100.220"]}, {"ssh": "mini-2", "ips": ["10.85.100.221"]},'
        ' {"ssh": "mini-3", "ips": ["10.85.100.222"]}]'
    )
    done = hostfile(str(hosts))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "10.85.100.220 slots=1\n10.85.100.221 slots=1\n10.85.100.222 slots=1\n"
    out = tmp_path / "hostfile"
    assert hostfile(str(hosts), "--slots", "4", "-o", str(out)).returncode == 0
    assert out.read_text().splitlines()[0] == "10.85.100.220 slots=4"


def test_bad_input_names_the_file_line_or_flag(tmp_path: Path) -> None:
    bad = tmp_path / "hosts.json"
    bad.write_text('[{"ssh": "a", "ips": ["10.0.0.1"]},\n {"ips": ["10.0.0.2"]}]')
    done = hostfile(str(bad))
    assert done.returncode == 2 and f"{bad}:2" in done.stderr and '"ssh"' in done.stderr
    good = tmp_path / "ok.json"
    good.write_text('[{"ssh": "a"}]')
    done = hostfile(str(good), "--slots", "0")
    assert done.returncode == 2 and "--slots" in done.stderr
    assert hostfile(str(tmp_path / "missing.json")).returncode == 2

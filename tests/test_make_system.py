"""`make system` on a fresh VM, where another apt (unattended-upgrades) may hold dpkg's
lock at first: every apt-get it runs waits for the lock (up to 10 minutes) instead of
failing in seconds with "Could not get lock", and it says so before it waits.

apt-get is a stand-in on PATH that records its arguments: the test checks what make
runs, without the network or changing the machine's packages."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from tests.conftest import require

REPO = Path(__file__).resolve().parents[1]


def test_every_apt_get_of_make_system_waits_for_the_dpkg_lock(tmp_path: Path) -> None:
    require(os.geteuid() == 0 and shutil.which("make") is not None, "root and make")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fake = bin_dir / "apt-get"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    drop_in = f"PODMAN_DROP_IN={tmp_path / 'drop-in.conf'}"
    done = subprocess.run(
        ["make", "-s", "system", "APT_PACKAGES=rl-no-such-package-xyz", drop_in],
        cwd=REPO,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "apt-get install rl-no-such-package-xyz" in done.stdout
    assert "waited for up to 10 minutes" in done.stdout
    runs = calls.read_text().splitlines()
    assert [r.split()[0] for r in runs] == ["update", "install"], runs
    assert all("DPkg::Lock::Timeout=600" in r for r in runs), runs
    assert "rl-no-such-package-xyz" in runs[1]

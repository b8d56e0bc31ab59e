"""``ringleader sync`` and ``install`` on real SSH hosts (network namespaces): the
directory reaches a host that lacks it, minus what .gitignore and .ringleaderignore
exclude, so ``doctor`` then finds the same code everywhere; pip runs per host and one
host's failure is reported without hiding the others."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from tests.fixtures.testhosts import (  # noqa: F401  (provides the `make_test_hosts` fixture)
    TestHostNetwork,
    make_test_hosts_fixture,
)

MakeHosts = Callable[..., TestHostNetwork]


def cli(net: TestHostNetwork, *args: str) -> subprocess.CompletedProcess[str]:
    command, *rest = args  # the option before any `--`
    argv = [sys.executable, "-m", "ringleader", command, "--ssh-config", str(net.ssh_config), *rest]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def git_project(tmp_path: Path) -> Path:
    code = tmp_path / "proj"
    (code / "data").mkdir(parents=True)
    (code / "train.py").write_text("print('train')\n")
    (code / "run.log").write_text("noise\n")
    (code / "data" / "big.bin").write_bytes(b"0" * 1000)
    (code / ".gitignore").write_text("*.log\n")
    (code / ".ringleaderignore").write_text("# not for the hosts\ndata/\n")
    subprocess.run(["git", "init", "-q", str(code)], check=True)
    subprocess.run(["git", "-C", str(code), "add", "train.py", ".gitignore"], check=True)
    return code


def test_sync_copies_to_the_same_path_and_doctor_then_agrees(
    make_test_hosts: MakeHosts, tmp_path: Path
) -> None:
    code = git_project(tmp_path)
    net = make_test_hosts(2, hidden_dirs={1: [code]})
    hosts = [h.address for h in net.hosts]
    doctor = [*("doctor", *hosts, "--workdir", str(code), "--min-free-gb", "0.01", "--json",
                  "--no-bandwidth")]  # fmt: skip
    before = cli(net, *doctor)
    assert before.returncode == 1 and "is missing" in before.stdout

    done = cli(net, "sync", str(code), "-H", hosts[0], "-H", hosts[1])
    assert done.returncode == 0, done.stdout + done.stderr
    said = {line.split()[0]: " ".join(line.split()[2:]) for line in done.stdout.splitlines()[1:]}
    assert said[hosts[1]].endswith(": 3 files copied"), done.stdout  # it lacked all 3
    assert said[hosts[0]].endswith("already up to date"), done.stdout  # the shared path
    listing = net.ssh(1, f"cd {code} && find . -type f | sort").stdout.split()
    assert "./train.py" in listing and "./.gitignore" in listing
    assert "./run.log" not in listing and "./data/big.bin" not in listing  # both ignored

    after = cli(net, *doctor)
    assert after.returncode == 0, after.stdout
    codes = {r["checks"]["code"]["detail"] for r in json.loads(after.stdout)["hosts"]}
    assert len(codes) == 1  # one fingerprint everywhere

    (code / "train.py").write_text("print('train v2')\n")  # an edit here reaches there
    again = cli(net, "sync", str(code), "-H", hosts[1])
    assert again.returncode == 0 and ": 1 file copied" in again.stdout, again.stdout
    assert net.ssh(1, f"cat {code}/train.py").stdout == "print('train v2')\n"


def wheel(directory: Path) -> Path:
    """A tiny pure-Python wheel (no build step, no index needed)."""
    path = directory / "rltiny-0.1-py3-none-any.whl"
    info = "rltiny-0.1.dist-info"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr("rltiny/__init__.py", "VERSION = '0.1'\n")
        whl.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: rltiny\nVersion: 0.1\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                     "Tag: py3-none-any\n")  # fmt: skip
        whl.writestr(f"{info}/RECORD", "")
    return path


def test_install_runs_pip_on_every_host_and_reports_each(
    make_test_hosts: MakeHosts, tmp_path: Path
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    package = wheel(wheels)
    net = make_test_hosts(2, hidden_dirs={1: [wheels]})  # host 1 cannot see the wheel
    target = tmp_path / "site"
    hosts = [h.address for h in net.hosts]
    done = cli(net, "install", "-H", hosts[0], "-H", hosts[1], "-H", net.unreachable_address,
               "--", "--no-index", "--no-deps", "--target", str(target), str(package))  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    rows = {line.split()[0]: line.split()[1] for line in done.stdout.splitlines()[1:] if line}
    assert rows == {hosts[0]: "ok", hosts[1]: "failed", net.unreachable_address: "failed"}
    assert "Successfully installed rltiny-0.1" in done.stdout
    assert (target / "rltiny" / "__init__.py").is_file()
    assert f"{net.unreachable_address}: fix:" in done.stderr


def test_entries_naming_this_machine_run_here_without_ssh(tmp_path: Path) -> None:
    """Seed 003 on one machine: ``localhost`` entries, no sshd here.  doctor, sync and
    install run here, as launch does (an ssh config that fails every connection shows
    that none is made)."""
    code = git_project(tmp_path)
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  ProxyCommand /bin/false\n")
    base = [sys.executable, "-m", "ringleader"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], capture_output=True, text=True, timeout=300,
                              cwd=code, check=False)  # fmt: skip

    doctor = run("doctor", "localhost", "--ssh-config", str(config), "--workdir", str(code),
                 "--min-free-gb", "0.01", "--no-bandwidth", "--json")  # fmt: skip
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    login = json.loads(doctor.stdout)["hosts"][0]["checks"]["login"]
    assert (login["ok"], login["detail"]) == (True, "this machine (no ssh)")

    synced = run("sync", str(code), "-H", "localhost", "--ssh-config", str(config))
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert f"this machine: {code} is the source" in " ".join(synced.stdout.split())

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    target = tmp_path / "site"
    installed = run("install", "-H", "localhost", "--ssh-config", str(config), "--",
                    "--no-index", "--no-deps", "--target", str(target), str(wheel(wheels)))  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (target / "rltiny" / "__init__.py").is_file()

"""``ringleader doctor`` on real SSH hosts (network namespaces sharing this filesystem):
passes on a healthy trio, and names the host and the fix for each kind of failure.

Behaviour only: how long doctor takes, and the bandwidth it measures, are
``bench/netbench.py``'s to time (a loaded machine must not fail these tests)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fixtures.testhosts import (  # noqa: F401  (provides the `make_test_hosts` fixture)
    TestHostNetwork,
    make_test_hosts_fixture,
)

MakeHosts = Callable[..., TestHostNetwork]


def project(tmp_path: Path) -> Path:
    """A small code directory to check (not a git checkout: every file counts)."""
    code = tmp_path / "proj"
    (code / "pkg").mkdir(parents=True)
    (code / "train.py").write_text("print('train')\n")
    (code / "pkg" / "model.py").write_text("LAYERS = 3\n")
    return code


def doctor(
    net: TestHostNetwork,
    code: Path,
    *hosts: str,
    extra: tuple[str, ...] = (),
    ssh_config: Path | None = None,
) -> Any:
    argv = [sys.executable, "-m", "ringleader", "doctor", *hosts, "--workdir", str(code),
            "--ssh-config", str(ssh_config or net.ssh_config), "--min-free-gb", "0.01",
            "--json", *extra]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=os.environ)
    assert done.stdout, done.stderr
    out = json.loads(done.stdout)
    report = {r["host"]: r for r in out["hosts"]}
    return done.returncode, report


def failed(report: dict[str, Any]) -> dict[str, list[str]]:
    return {
        host: sorted(k for k, c in r["checks"].items() if c["ok"] is False)
        for host, r in report.items()
        if not r["ok"]
    }


def test_a_healthy_trio_passes_every_check(make_test_hosts: MakeHosts, tmp_path: Path) -> None:
    net = make_test_hosts(3)
    code = project(tmp_path)
    hosts = [h.address for h in net.hosts]
    rc, report = doctor(net, code, *hosts, extra=("--no-bandwidth",))
    assert rc == 0 and failed(report) == {}, report
    first = report[net.hosts[0].address]
    assert first["checks"]["interface"]["detail"] == f"eth0 {net.hosts[0].address}"
    assert first["checks"]["mesh"]["detail"] == "reaches all 2 others"
    assert first["facts"]["files"] == 2


def test_bandwidth_is_measured_across_the_hosts_after_the_checks(
    make_test_hosts: MakeHosts, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    net = make_test_hosts(3)
    code = project(tmp_path)
    hosts = [h.address for h in net.hosts]
    argv = [sys.executable, "-m", "ringleader", "doctor", *hosts, "--workdir", str(code),
            "--ssh-config", str(net.ssh_config), "--min-free-gb", "0.01", "--sizes", "4K,1M"]  # fmt: skip
    # One real measurement (three ranks over gloo, ~25 s here), read as --json ...
    out = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    measured = json.loads(out.stdout)["bandwidth"]
    assert not measured["error"]
    assert [(r["bytes"], r["ranks"]) for r in measured["rows"]] == [(4096, 3), (2**20, 3)]
    for r in measured["rows"]:
        assert r["busbw"] == pytest.approx(r["algbw"] * 4 / 3)
        assert r["busbw"] == pytest.approx(r["moved"] / r["seconds"])
    # ... and shown as the table doctor prints without --json (the same function).
    from ringleader.cli.doctor import _bandwidth_table

    capsys.readouterr()
    _bandwidth_table(SimpleNamespace(**measured), len(hosts))
    shown = capsys.readouterr().out
    assert "allreduce over gloo, 3 ranks" in shown
    rows = [ln.split() for ln in shown.splitlines() if ln.strip().startswith(("4K", "1M"))]
    assert [r[0] for r in rows] == ["4K", "1M"]
    assert [r[1] for r in rows] == ["5.333K", "1.333M"]  # 2(N-1)K/N for N = 3
    # Each rate in a unit that shows it: three significant digits, never "0.000 GB/s".
    for row in rows:
        rates = re.findall(r"(\d+(?:\.\d+)?) ([KMG]?B/s)", " ".join(row))
        assert len(rates) == 2, row  # algbw and busbw
        assert all(1 <= float(figure) < 1000 for figure, _ in rates), row

    bad = subprocess.run([*argv, "--sizes", "2X"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--sizes" in bad.stderr


def test_each_failure_names_the_host_and_the_fix(
    make_test_hosts: MakeHosts, tmp_path: Path
) -> None:
    code = project(tmp_path)
    hidden_file = code / "pkg" / "model.py"
    net = make_test_hosts(3, hidden_dirs={1: [code], 2: [hidden_file]})
    hosts = [h.address for h in net.hosts]
    rc, report = doctor(net, code, *hosts, net.unreachable_address)
    assert rc == 1
    assert failed(report) == {
        hosts[1]: ["workdir"],  # the directory is missing there
        hosts[2]: ["code"],  # one file differs: another fingerprint
        net.unreachable_address: ["login"],
    }, report
    assert "ringleader sync" in report[hosts[1]]["checks"]["workdir"]["fix"]
    assert "ringleader sync" in report[hosts[2]]["checks"]["code"]["fix"]
    assert "reachable" in report[net.unreachable_address]["checks"]["login"]["fix"]


def test_a_missing_interpreter_and_an_unusable_interface(
    make_test_hosts: MakeHosts, tmp_path: Path
) -> None:
    net = make_test_hosts(2)
    code = project(tmp_path)
    hosts = [h.address for h in net.hosts]
    rc, report = doctor(net, code, *hosts, extra=("--python", "/opt/no-such/python3"))
    assert rc == 1 and failed(report) == {h: ["python"] for h in hosts}
    assert "/opt/no-such/python3" in report[hosts[0]]["checks"]["python"]["fix"]

    rc, report = doctor(net, code, *hosts, extra=("--network-interface", "lo"))
    assert rc == 1 and failed(report) == {h: ["interface"] for h in hosts}
    assert "loopback" in report[hosts[0]]["checks"]["interface"]["detail"]


def test_a_host_with_a_different_python_is_named_with_the_fix(
    make_test_hosts: MakeHosts, tmp_path: Path
) -> None:
    """``--python`` names a virtual environment (this one's packages) whose
    ``bin/python`` starts this venv's Python everywhere but inside one host's network
    namespace, where it starts the system's Python: another interpreter, without torch."""
    net = make_test_hosts(2)
    code = project(tmp_path)
    other = net.hosts[1].address
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text((Path(sys.prefix) / "pyvenv.cfg").read_text())
    (venv / "lib").symlink_to(Path(sys.prefix) / "lib")
    python = venv / "bin" / "python"
    python.write_text(
        "#!/bin/bash\n"
        f"if PATH=$PATH:/usr/sbin:/sbin ip -o -4 addr show | grep -q ' {other}/'; then\n"
        '  exec /usr/bin/python3 "$@"\n'
        "fi\n"
        f'exec -a "$0" {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    hosts = [h.address for h in net.hosts]
    rc, report = doctor(net, code, *hosts, extra=("--python", str(python), "--no-bandwidth"))
    assert rc == 1 and failed(report) == {other: ["python", "versions"]}, report
    check = report[other]["checks"]["python"]
    assert check["detail"].startswith("/usr/bin/python3") and f"(here: {python} " in check["detail"]
    assert other in check["fix"] and "same interpreter" in check["fix"]
    assert "ringleader install" in report[other]["checks"]["versions"]["fix"]


def test_a_host_whose_loopback_is_down_is_told_to_bring_it_up(
    make_test_hosts: MakeHosts, tmp_path: Path
) -> None:
    """Loopback down: the host cannot reach its own addresses (rank 0's store on its
    host, ranks beside it), though every other check passes over eth0."""
    net = make_test_hosts(2)
    code = project(tmp_path)
    hosts = [h.address for h in net.hosts]
    subprocess.run(["ip", "-n", net.hosts[1].netns, "link", "set", "lo", "down"], check=True)
    rc, report = doctor(net, code, *hosts, extra=("--no-bandwidth",))
    assert rc == 1 and failed(report) == {hosts[1]: ["interface"]}, report
    check = report[hosts[1]]["checks"]["interface"]
    assert "the loopback interface is down" in check["detail"], check
    assert "`ip link set lo up`" in check["fix"] and hosts[1] in check["fix"]


def test_a_master_named_localhost_is_fine_alone_named_with_others_and_lo_down_said(
    make_test_hosts: MakeHosts, tmp_path: Path
) -> None:
    """``localhost`` as the master: each host reads it as itself (the entry itself runs
    here, as launch runs it). Alone that is fine; with others the master's name is the
    problem; and with the loopback interface down, that (not "no route to the master")
    is said.
    A master named by an alias only ssh knows (``mini-1``) is said not to resolve."""
    net = make_test_hosts(2)
    code = project(tmp_path)
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host localhost mini-1\n  HostName {net.hosts[0].address}\n\n{net.ssh_config.read_text()}"
    )
    alone = ("--no-bandwidth",)
    rc, report = doctor(net, code, "localhost", extra=alone, ssh_config=config)
    assert rc == 0 and failed(report) == {}, report
    assert report["localhost"]["checks"]["interface"]["detail"] == "lo 127.0.0.1"

    other = net.hosts[1].address
    rc, report = doctor(net, code, "localhost", other, extra=alone, ssh_config=config)
    assert rc == 1 and failed(report) == {h: ["interface"] for h in ("localhost", other)}
    check = report[other]["checks"]["interface"]
    assert check["detail"].startswith("the master localhost is 127.0.0.1 there"), check
    assert "not localhost" in check["fix"]

    rc, report = doctor(net, code, "mini-1", other, extra=alone, ssh_config=config)
    assert rc == 1 and failed(report) == {h: ["interface"] for h in ("mini-1", other)}
    check = report[other]["checks"]["interface"]
    assert check["detail"].startswith("the master mini-1 does not resolve there"), check
    assert "/etc/hosts" in check["fix"] and "alias" in check["fix"]

    # A `localhost` entry runs here (no ssh): host 0 reached by its alias, whose
    # hosts.json address says the master is `localhost`, reads 127.0.0.1 there.
    subprocess.run(["ip", "-n", net.hosts[0].netns, "link", "set", "lo", "down"], check=True)
    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps([{"ssh": "mini-1", "ips": ["localhost"]}]))
    rc, report = doctor(net, code, extra=(*alone, "--hostfile", str(hosts)), ssh_config=config)
    check = report["mini-1"]["checks"]["interface"]
    assert rc == 1 and "no route" not in check["detail"], check
    assert "cannot reach itself over TCP (127.0.0.1: " in check["detail"]
    assert "the loopback interface is down" in check["detail"]
    assert "`ip link set lo up`" in check["fix"]


def test_required_paths_are_checked_on_every_host(tmp_path: Path) -> None:
    """Seed 000's "verify /opt/intel/oneapi on every node", generically: the path that
    is missing is named with its fix; a relative path is refused naming the flag."""
    code = project(tmp_path)
    base = [sys.executable, "-m", "ringleader", "doctor", "localhost", "--workdir", str(code),
            "--min-free-gb", "0.01", "--no-bandwidth"]  # fmt: skip
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run([*base, "--require-path", "/etc", "--require-path", "/opt/no-such-zz"],
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "paths: missing: /opt/no-such-zz" in done.stdout
    assert "fix: install or mount them on localhost" in done.stdout
    fine = subprocess.run([*base, "--require-path", "/etc", "--json"], capture_output=True,
                          text=True, timeout=120, env=env)  # fmt: skip
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert json.loads(fine.stdout)["hosts"][0]["checks"]["paths"]["detail"] == "/etc"
    bad = subprocess.run([*base, "--require-path", "opt/x"], capture_output=True, text=True,
                         timeout=120, env=env)  # fmt: skip
    assert bad.returncode == 2 and "--require-path" in bad.stderr, bad.stderr
    assert "'opt/x' is not an absolute path" in bad.stderr
    # The same from the hosts file itself, its object form's "require_paths".
    hosts = tmp_path / "hosts.json"
    hosts.write_text('{"hosts": [{"ssh": "localhost"}],\n "require_paths": ["/opt/no-such-zz"]}')
    rest = base[base.index("--workdir") :]
    listed = subprocess.run([*base[:4], "--hostfile", str(hosts), *rest, "--json"],
                            capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert listed.returncode == 1, listed.stdout + listed.stderr
    paths = json.loads(listed.stdout)["hosts"][0]["checks"]["paths"]
    assert paths["detail"] == "missing: /opt/no-such-zz", paths
    hosts.write_text('{"hosts": [{"ssh": "localhost"}],\n "require_paths": "/opt"}')
    wrong = subprocess.run([*base[:4], "--hostfile", str(hosts), *rest], capture_output=True,
                           text=True, timeout=120, env=env)  # fmt: skip
    assert wrong.returncode == 2 and f"{hosts}:2" in wrong.stderr, wrong.stderr

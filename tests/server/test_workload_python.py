"""A root server runs workloads out of the box (issue 24, item 4).

A root server runs each user's workloads as that user's OS account, which
cannot run this suite's interpreter (a venv of pyenv's Python under /root,
0700).  Real parts: a real root server started with no flag but its port, real
per-user OS accounts (made by the server, removed after), the digits stand-in of
seed 002 trained to Completed, and a real ``ringleader workload-python`` (venv +
pip from this machine's package index) in a world-readable directory
(``RINGLEADER_WORKLOAD_PYTHON_DIR``, so the machine's /var/lib stays untouched).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.server import workload_python
from tests.cli.conftest import run_cli
from tests.conftest import require
from tests.fixtures.tenants import need_root_and_useradd, wait_logs
from tests.helpers.phases import wait_phase
from tests.server.conftest import ServerProcess, stop_workloads

DIR_VAR = "RINGLEADER_WORKLOAD_PYTHON_DIR"
SEED_002 = (  # CLI V1 of seed 002, as printed, "workload-name" filled
    "submit-dist", "pytorch", "mnist", "--workers=2", "-g", "0.1",
    "-i", "kubeflow/pytorch-dist-mnist:latest",
)  # fmt: skip


def _ringleader(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, timeout=600)


def _need_an_interpreter_accounts_cannot_run() -> None:
    need_root_and_useradd()
    found = workload_python.probe(sys.executable)
    require(
        not found.runs_pods,
        "an interpreter unprivileged accounts cannot run (this one is runnable by them)",
    )


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A directory every account can enter (a venv under it is usable by them)."""
    made = Path(tempfile.mkdtemp(prefix="rl-wp-", dir="/var/tmp"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made, ignore_errors=True)


@pytest.fixture(scope="module")
def shared(base: Path) -> Path:
    """``ringleader workload-python`` made once for the module, where the server looks."""
    _need_an_interpreter_accounts_cannot_run()
    target = base / "python"
    done = _ringleader("workload-python", env={**os.environ, DIR_VAR: str(target)})
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert "ready:" in done.stdout and "no flag needed" in done.stdout, done.stdout
    return target


def test_a_root_server_refuses_to_start_naming_what_works(tmp_path: Path) -> None:
    _need_an_interpreter_accounts_cannot_run()
    env = {**os.environ, "RINGLEADER_HOME": str(tmp_path / "home")}
    env[DIR_VAR] = "/nonexistent/rl-python"  # no shared interpreter made
    started = _ringleader("server", "--port", "1", env=env)
    assert started.returncode == 2, started.stderr
    said = started.stderr
    assert said.startswith("error: --workload-python:") and "Permission denied" in said, said
    assert "sudo ringleader workload-python\n" in said and "/nonexistent/rl-python" in said, said
    assert "sudo ringleader server --run-as server\n" in said, said
    if workload_python.probe("/usr/bin/python3").ringleader:  # Debian's, as on a fresh machine
        assert re.search(r"--workload-python /usr/bin/python3\n\s+lacks ringleader", said), said
    assert max(len(line) for line in said.splitlines()[1:]) <= 80, said  # the choices fit
    assert not (tmp_path / "home" / "ringleader.db").exists()  # nothing was started


def test_after_workload_python_a_flagless_root_server_runs_seed_002_to_completed(
    shared: Path, base: Path
) -> None:
    before = {entry.pw_name for entry in pwd.getpwall()}
    server = ServerProcess(base / "home")
    server.default_args = ()  # as a user types it: `sudo ringleader server`
    server.env[DIR_VAR] = str(shared)
    work = base / "work"
    work.mkdir(mode=0o755, exist_ok=True)
    try:
        server.start()
        log = (server.home / "server-test.log").read_text()
        assert "warning" not in log, log
        for args in (
            ("project", "create", "team-a", "--gpu", "1"),
            ("config", "project", "team-a"),
        ):
            assert server.cli(*args).returncode == 0
        submitted = server.cli(*SEED_002, cwd=str(work))
        assert submitted.returncode == 0, submitted.stderr

        def phase(text: str) -> str | None:
            found = re.search(r"Status:\s+(\w+)", text)
            return found.group(1) if found else None

        described = wait_phase(
            lambda: server.cli("describe", "mnist").stdout,
            phase,
            {"Completed", "Failed"},
            timeout=600,
            say=str,
            every_s=1,
        )
        assert phase(described) == "Completed", described
        logs = wait_logs(server, "mnist", "final test accuracy")
        assert "No module named" not in logs, logs
        # It ran as the admin's own OS account, made by the server, not as root.
        made = {entry.pw_name for entry in pwd.getpwall()} - before
        assert "rl-admin" in made or "rl-admin" in before, made
    finally:
        server.kill()
        stop_workloads(server.home)
        # Only the account this server made (its one user, admin, by the default
        # template): tests running meanwhile make accounts of their own.
        if "rl-admin" not in before:
            subprocess.run(["userdel", "-r", "rl-admin"], capture_output=True, check=False)


def test_a_python_that_lacks_the_workload_packages_starts_with_a_warning(base: Path) -> None:
    """Debian's python with ringleader on PYTHONPATH runs pods; numpy and torch it lacks,
    and the server says so at start (workloads that import them would fail)."""
    need_root_and_useradd()
    missing = workload_python.probe("/usr/bin/python3").missing
    require(bool(missing), "a /usr/bin/python3 without numpy, torch or scikit-learn")
    server = ServerProcess(base / "home-debian", "--workload-python", "/usr/bin/python3")
    server.default_args = ()
    server.env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
    try:
        server.start()
    finally:
        server.kill()
    log = (server.home / "server-test.log").read_text()
    names = [workload_python.WORKLOAD_MODULES[m] for m in missing]
    assert f"warning: --workload-python /usr/bin/python3 lacks {', '.join(names)}" in log, log


def test_workload_python_refuses_bad_input_and_leaves_nothing(shared: Path, base: Path) -> None:
    env = dict(os.environ)
    exists = _ringleader("workload-python", "--dir", str(shared), env=env)
    assert exists.returncode == 2 and "--dir:" in exists.stderr and "--force" in exists.stderr
    assert (shared / "bin" / "python3").exists()  # the one made is kept

    closed = _ringleader("workload-python", "--dir", "/root/rl-python", env=env)
    assert closed.returncode == 2 and "--dir: /root is not enterable" in closed.stderr
    assert not Path("/root/rl-python").exists()

    unrunnable = _ringleader("workload-python", "--dir", str(base / "p2"), "--base",
                             sys.executable, env=env)  # fmt: skip
    assert unrunnable.returncode == 2 and "--base:" in unrunnable.stderr, unrunnable.stderr
    assert not (base / "p2").exists()

    bad = _ringleader("workload-python", "--dir", str(base / "p3"), "--package",
                      "ringleader-no-such-package-xyz", env=env)  # fmt: skip
    assert bad.returncode == 2 and "--package: pip exited" in bad.stderr, bad.stderr[-2000:]
    assert not (base / "p3").exists()  # the half-made venv is gone

"""``make demo`` end to end: server, 2-worker digits workload, logs, accuracy, URL; a rerun.

The demo leaves its server running by design; the test stops it by pid (as
``make demo-stop`` does) and checks that nothing the demo started is left.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import wait_until

DEMO = [sys.executable, "-m", "ringleader.examples.demo"]
ACCURACY = re.compile(r"^final test accuracy: (\d\.\d+)", re.M)
API = re.compile(r"^  API: +(http://127\.0\.0\.1:\d+)\s", re.M)
WORKLOAD = re.compile(r"\(workload (digits-[0-9a-f]+), Completed")
SERVER_PID = re.compile(r"keeps running \(pid (\d+)\)")


def _env() -> dict[str, str]:
    """No RINGLEADER_* of the caller's reaches the demo (it sets its own home)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}


def _demo(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DEMO, "--home", str(home), *args],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def demo_pids(home: Path) -> list[int]:
    """Live processes of the demo under ``home``: the server (its RINGLEADER_HOME) and
    the workload's (pods get no RINGLEADER_HOME, but their run dir and checkpoint
    dir are under it, in their command line or environment)."""
    needle = str(home).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if needle in environ or needle in cmdline:
            found.append(int(name))
    return sorted(found)


@pytest.fixture
def demo_home(tmp_path: Path) -> Iterator[Path]:
    """A fresh demo home; afterwards no process carrying it (server, ranks) may be left."""
    home = tmp_path / "demo-home"
    try:
        yield home
    finally:
        leftovers = demo_pids(home)
        for pid in leftovers:  # only if the test failed half-way: end what the demo started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not demo_pids(home), 15, "the demo's processes to end")
        assert not leftovers, f"processes left behind: {leftovers}"


def test_demo_runs_twice_then_stops(demo_home: Path) -> None:
    first = _demo(demo_home, "--port", "0")
    out = first.stdout
    assert first.returncode == 0, out + first.stderr
    # What the user sees: the commands, the merged logs of every pod, accuracy, URL, token.
    assert "submit-dist pytorch digits --name-prefix --workers 2 --" in out
    assert re.search(r"^\[digits-[0-9a-f]+-master-0\] epoch 10/10", out, re.M), out
    accuracy = ACCURACY.search(out)
    assert accuracy and float(accuracy.group(1)) >= 0.9, out
    api = API.search(out)
    assert api, out
    url = api.group(1)
    assert f"{url}/docs" in out and " token" in out
    # What a newcomer needs to type the same: the home, why only the master prints.
    assert f"with RINGLEADER_HOME={demo_home}" in out
    assert "the workers train silently" in out and f"export RINGLEADER_HOME={demo_home}" in out
    name = WORKLOAD.search(out).group(1)
    pid = int(SERVER_PID.search(out).group(1))

    # The server runs on by design, answers at the printed URL and is the one in the pid file.
    assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    # The web UI it names answers there: a browser is sent to the login page.
    assert f"Web UI:    {url}/" in out
    ui = httpx.get(f"{url}/", headers={"Accept": "text/html"}, follow_redirects=True, timeout=5)
    assert ui.status_code == 200 and "Log in to ringleader" in ui.text
    assert (demo_home / "server.pid").read_text().split() == [str(pid)]
    assert (demo_home / "credentials.json").stat().st_mode & 0o077 == 0
    # Only the server is left: every rank and supervisor of the workload has ended.
    wait_until(lambda: demo_pids(demo_home) == [pid], 30, "the ranks to end")

    # A second run reuses the server and takes a fresh name (no clash with the first).
    second = _demo(demo_home, "--port", "0", "--", "--max-steps", "5")
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"server already running: {url} (pid {pid})" in second.stdout
    second_name = WORKLOAD.search(second.stdout).group(1)
    assert second_name != name

    # Stopping it (make demo-stop) ends the server by its pid; nothing of the demo is left.
    stopped = _demo(demo_home, "--stop")
    assert stopped.returncode == 0 and f"pid {pid}" in stopped.stdout, stopped.stdout
    wait_until(lambda: not _alive(pid), 20, "the server to exit")
    assert not (demo_home / "server.pid").exists()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/healthz", timeout=2)
    assert demo_pids(demo_home) == []


def test_demo_fails_when_the_workload_fails(demo_home: Path) -> None:
    """A workload that does not complete makes the demo exit non-zero; --stop-after cleans up."""
    result = _demo(demo_home, "--port", "0", "--stop-after", "--backoff-limit", "0", "--", "--bad")
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"demo failed: workload digits-[0-9a-f]+ is Failed", result.stdout)
    assert "server stopped" in result.stdout
    assert not (demo_home / "server.pid").exists()


def test_ctrl_c_then_stop_leaves_nothing_running(demo_home: Path) -> None:
    """Ctrl-C mid-training leaves server and workload running; --stop ends both."""
    demo = subprocess.Popen(
        [*DEMO, "--home", str(demo_home), "--port", "0", "--", "--epochs", "500"],
        env=_env(),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        for line in demo.stdout:
            if "epoch 1/500" in line:
                break
        else:
            raise AssertionError("the demo ended before training started")
        os.killpg(demo.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
        rest = demo.communicate(timeout=60)[0]
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 130, rest
    assert "interrupted: the server and the workload keep running" in rest
    pid = int((demo_home / "server.pid").read_text())
    assert len(demo_pids(demo_home)) > 1  # the server, and the training gang

    stopped = _demo(demo_home, "--stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert re.search(r"suspended the unfinished workloads: digits-[0-9a-f]+", stopped.stdout)
    assert f"stopped the demo server (pid {pid})" in stopped.stdout
    wait_until(lambda: not demo_pids(demo_home), 20, "the demo's processes to end")

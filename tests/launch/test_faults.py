"""Fail-fast, exit codes, restarts, signals and kill -9: no orphans after any end."""

from __future__ import annotations

import re
import signal
import time
from datetime import datetime

import pytest

from tests.conftest import job_pids, launch, require, start_launch, wait_for_ready, wait_until

try:
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

# Rank 1 fails after a moment; rank 0 and its grandchild would sleep forever.
FAIL_ONE = """
import os, subprocess, sys, time
rank = int(os.environ["RANK"])
subprocess.Popen(["sleep", "300"])                      # a grandchild that must not survive
if rank == 1:
    time.sleep(0.3)
    for i in range(25):
        print(f"stderr line {i}", file=sys.stderr)
    sys.exit(7)
time.sleep(300)
"""

READY_THEN_WAIT = """
import os, subprocess, sys, time
subprocess.Popen(["sleep", "300"])
print("ready", flush=True)
time.sleep(300)
"""


def _root_time(stderr: str) -> float:
    stamp = re.search(r"time\s+: (\S+ \S+)", stderr).group(1)
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp()


def test_failure_stops_every_rank_and_summarises_the_root_cause(script) -> None:
    proc = launch(
        "-n", "3", "--run-id", "rl-failfast", "--", "python", script(FAIL_ONE), timeout=60
    )
    assert proc.returncode == 7
    err = proc.stderr
    assert "Root Cause (first observed failure)" in err
    assert re.search(r"rank\s+: 1\b", err) and re.search(r"exit code : 7\b", err)
    assert "host      : localhost" in err
    # The last 20 lines of its stderr, not more.
    summary = err.split("Root Cause", 1)[1]
    assert "stderr line 24" in summary and "stderr line 5\n" in summary
    assert "stderr line 4\n" not in summary
    assert job_pids("rl-failfast") == []


def test_rank_killed_by_signal_exits_128_plus_signal(script) -> None:
    body = "import os, signal, time\nif os.environ['RANK'] == '0':\n    os.kill(os.getpid(), signal.SIGKILL)\ntime.sleep(300)"
    proc = launch("-n", "2", "--run-id", "rl-sigkill", "--", "python", script(body), timeout=60)
    assert proc.returncode == 128 + signal.SIGKILL
    assert "SIGKILL" in proc.stderr
    assert job_pids("rl-sigkill") == []


def test_success_leaves_no_grandchildren(script) -> None:
    body = "import subprocess; subprocess.Popen(['sleep', '300']); print('done')"
    proc = launch("-n", "2", "--run-id", "rl-okclean", "--", "python", script(body), timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.count("done") == 2
    assert job_pids("rl-okclean") == []


def test_escaped_grandchild_is_swept_by_job_id(script) -> None:
    body = "import subprocess; subprocess.Popen(['setsid', 'sleep', '300']); print('done')"
    proc = launch("-n", "1", "--run-id", "rl-escaped", "--", "python", script(body), timeout=60)
    assert proc.returncode == 0
    assert job_pids("rl-escaped") == []


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_and_sigterm_stop_every_rank(script, signum: int, code: int) -> None:
    job = f"rl-sig{signum}"
    proc = start_launch("-n", "2", "--run-id", job, "--", "python", script(READY_THEN_WAIT))
    wait_for_ready(proc, 2)
    proc.send_signal(signum)
    assert proc.wait(timeout=15) == code
    assert "stopped by" in proc.stderr.read()
    assert job_pids(job) == []


def test_kill_9_of_the_launcher_leaves_nothing_within_5s(script) -> None:
    job = "rl-kill9"
    proc = start_launch("-n", "2", "--run-id", job, "--", "python", script(READY_THEN_WAIT))
    wait_for_ready(proc, 2)
    # agent, 2 ranks, 2 grandchildren (a grandchild just forked may not show its env yet)
    wait_until(lambda: len(job_pids(job)) >= 5, timeout=10, what="the whole job to be up")
    proc.kill()
    proc.wait()
    wait_until(lambda: job_pids(job) == [], timeout=5, what="the job's processes to end")


STUCK_IN_COLLECTIVE = """
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
dist.barrier()
if rank == 1:
    time.sleep(0.5)
    sys.exit(5)
dist.all_reduce(torch.ones(4))   # rank 0 waits here for a peer that is gone
time.sleep(300)
"""


def test_rank_stuck_in_a_collective_is_gone_within_3s(script) -> None:
    require(HAVE_TORCH, "torch")
    proc = launch(
        "-n", "2", "--run-id", "rl-stuck", "--", "python", script(STUCK_IN_COLLECTIVE), timeout=120
    )
    ended = time.time()
    assert proc.returncode == 5, proc.stderr
    assert ended - _root_time(proc.stderr) < 3.0
    assert job_pids("rl-stuck") == []


CRASH_ONCE = """
import os, sys, torch, torch.distributed as dist
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
print("PORT", attempt, os.environ["MASTER_PORT"], flush=True)
dist.init_process_group("gloo")
if attempt == 0 and dist.get_rank() == 1:
    sys.exit(3)
t = torch.ones(2)
dist.all_reduce(t)
print("SUM", attempt, int(t[0]), flush=True)
dist.destroy_process_group()
"""


def test_restart_gets_a_fresh_rendezvous_every_time(script) -> None:
    require(HAVE_TORCH, "torch")
    path = script(CRASH_ONCE)
    for i in range(3):
        proc = launch(
            "-n", "2", "--max-restarts", "1", "--no-prefix", "--", "python", path, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("SUM 1 2") == 2, proc.stdout
        ports = {line.split()[2] for line in proc.stdout.splitlines() if line.startswith("PORT")}
        assert len(ports) == 2, f"run {i}: attempts shared a port: {proc.stdout}"
        assert "restarting the gang (1/1)" in proc.stderr


def test_restarts_exhausted_lists_every_attempt(script) -> None:
    body = "import os, sys; sys.exit(4 if os.environ['RANK'] == '1' else 0)"
    proc = launch("-n", "2", "--max-restarts", "2", "--", "python", script(body), timeout=60)
    assert proc.returncode == 4
    for attempt in range(3):
        assert f"attempt {attempt}: rank 1 on localhost: exit code 4" in proc.stderr


RECORDED = """
from ringleader import runtime

@runtime.record
def main():
    raise ValueError("labels and logits disagree")

main()
"""


def test_recorded_traceback_appears_in_the_summary(script) -> None:
    proc = launch("-n", "2", "--", "python", script(RECORDED), timeout=60)
    assert proc.returncode == 1
    assert "traceback (recorded by the rank)" in proc.stderr
    assert "ValueError: labels and logits disagree" in proc.stderr


IGNORES_SIGTERM = """
import os, signal, sys, time
if os.environ["RANK"] == "0":
    signal.signal(signal.SIGTERM, lambda *a: print("ignoring SIGTERM", flush=True))
    print("ready", flush=True)
    time.sleep(300)
time.sleep(0.5)
sys.exit(2)
"""


def test_rank_ignoring_sigterm_is_killed_after_grace(script) -> None:
    # The launch's own limit (60 s) is far below the rank's 300 s sleep: it ends
    # only because the rank was killed after the 1 s grace (no duration asserted).
    proc = launch(
        "-n",
        "2",
        "--grace",
        "1",
        "--run-id",
        "rl-grace",
        "--",
        "python",
        script(IGNORES_SIGTERM),
        timeout=60,
    )
    assert proc.returncode == 2
    assert "ignoring SIGTERM" in proc.stdout  # it got SIGTERM first, then SIGKILL
    assert job_pids("rl-grace") == []


def test_an_agent_told_bye_exits_cleanly_while_its_link_is_still_open() -> None:
    """The supervisor says ``bye`` and keeps its end of the pipe open a moment: the
    agent's reader thread is still blocked reading stdin when the agent ends.  It must
    exit 0 at once, not sit out Python's one-second wait for stdin's lock at shutdown
    and then abort ("Fatal Python error: _enter_buffered_busy", SIGABRT), which every
    launch paid at its end."""
    import subprocess
    import sys

    agent = subprocess.Popen(
        [sys.executable, "-m", "ringleader.launch.agent", "--job-id", "rl-bye-test"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert agent.stdin is not None
    try:
        agent.stdin.write(b'{"op": "bye"}\n')
        agent.stdin.flush()
        code = agent.wait(timeout=60)  # the pipe stays open: only the agent can end this
        stderr = agent.stderr.read().decode() if agent.stderr else ""
    finally:
        agent.stdin.close()
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert code == 0, stderr
    assert "Fatal Python error" not in stderr, stderr

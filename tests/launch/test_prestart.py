"""The local agent started ahead (launch/prestart.py): taken when it fits, never left over."""

from __future__ import annotations

import sys

import pytest

from ringleader.launch import prestart
from ringleader.launch.command import parse_quick, run
from tests.conftest import job_pids, launch, wait_until


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["-n", "2", "--", "python", "t.py"], True),
        (["--nproc-per-node", "2", "--", "python", "t.py", "--hosts", "x"], True),
        (["-H", "a:2,b:2", "--", "python", "t.py"], False),
        (["-Ha:2", "--", "python", "t.py"], False),
        (["--hostfile=hosts.json", "--", "python", "t.py"], False),
        (["--hosts", "a", "--", "python", "t.py"], False),
        (["-n", "2", "--help"], False),
        (["-n", "2", "python", "t.py"], False),  # no "--": Typer explains, no agent needed
    ],
)
def test_an_agent_is_started_ahead_only_for_ranks_on_this_host(
    argv: list[str], wanted: bool
) -> None:
    assert prestart.wants_local_agent(argv) is wanted


def test_the_run_id_given_is_the_agents() -> None:
    assert prestart.given_run_id(["--run-id", "rl-a", "--", "x"]) == "rl-a"
    assert prestart.given_run_id(["--run-id=rl-b", "--", "x"]) == "rl-b"
    assert prestart.given_run_id(["-n", "1", "--", "x", "--run-id", "rl-c"]) is None


def test_the_launch_adopts_the_agent_started_ahead(capfd: pytest.CaptureFixture[str]) -> None:
    argv = ["-n", "1", "--", sys.executable, "-c", "import os; print('PARENT', os.getppid())"]
    prestart.prestart(argv)
    started = prestart._prestarted
    assert started is not None and prestart.run_id() is not None
    args = parse_quick(argv)
    assert args is not None
    assert run(args) == 0
    out = capfd.readouterr().out
    assert f"PARENT {started.pid}" in out, out  # the rank's agent is the one started ahead
    assert prestart._prestarted is None
    started.wait(timeout=30)


def test_an_agent_that_does_not_fit_is_ended_not_left() -> None:
    prestart.prestart(["--run-id", "rl-prestart-a", "--", "true"])
    started = prestart._prestarted
    assert started is not None
    assert prestart.take(sys.executable, "rl-prestart-other") is None  # another job: not this one
    assert started.wait(timeout=30) is not None
    prestart.prestart(["--run-id", "rl-prestart-b", "--", "true"])
    started = prestart._prestarted
    assert started is not None
    prestart.discard()
    assert started.wait(timeout=30) is not None


def test_a_launch_refused_after_the_agent_started_leaves_no_agent() -> None:
    job = "rl-prestart-refused"
    proc = launch("-n", "2", "--framework", "nosuch", "--run-id", job, "--", "true")
    assert proc.returncode != 0 and "--framework" in proc.stderr, proc.stderr
    wait_until(lambda: job_pids(job) == [], timeout=30, what="the agent started ahead to end")

"""Parts of a launch's end, in process: the agent's sweeps and the wait on an agent's exit.

Why: a gang that ended well is stopped (``stop``) and then let go (``bye``), and both
stop the agent's ranks; the /proc walk for the job's marker must run again only when a
rank started since the last one (every process on the host is read), never be dropped
after a start. An agent's exit is waited on by its pid, not by polling.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ringleader.launch import agent as agent_module
from ringleader.launch.agent import Agent
from ringleader.launch.links import exited
from ringleader.launch.protocol import MessageWriter


@pytest.fixture
def sweeps(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Each ``procs.terminate`` the agent asks for: its groups and marker."""
    calls: list[dict[str, Any]] = []

    def terminate(pgids: list[int], grace_s: float, **kw: Any) -> None:
        calls.append({"pgids": list(pgids), "marker": kw.get("marker")})

    monkeypatch.setattr(agent_module.procs, "terminate", terminate)
    return calls


def test_a_second_stop_with_no_rank_started_since_walks_proc_no_more(
    sweeps: list[dict[str, Any]], tmp_path: Path
) -> None:
    agent = Agent(MessageWriter(io.BytesIO()), "rl-parts")
    agent.stop(0.1)  # the first stop sweeps, whatever ran before this agent
    assert sweeps == [{"pgids": [], "marker": "RINGLEADER_JOB_ID=rl-parts"}]
    agent.stop(0.1)  # ``bye`` after ``stop``: nothing of the job can be left
    assert len(sweeps) == 1
    error_file = str(tmp_path / "err.json")
    rp = agent._spawn(0, [sys.executable, "-c", "pass"], str(tmp_path), {}, error_file)
    assert rp is not None
    agent._watch(rp, error_file)
    agent.stop(0.1)  # a rank ran since: its stop sweeps again
    assert [c["pgids"] for c in sweeps] == [[], [rp.proc.pid]]
    agent.close(0.1)  # and the goodbye after it does not
    assert len(sweeps) == 2


def test_an_exit_is_reaped_when_it_comes_and_a_live_process_is_left_running() -> None:
    ends = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    assert exited(ends, 60.0)
    assert ends.returncode == 0
    lives = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not exited(lives, 0.05)
        assert lives.returncode is None
    finally:
        lives.kill()
        assert exited(lives, 60.0)
    assert lives.returncode == -9

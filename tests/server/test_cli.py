"""The CLI end to end against a real server process; kill -9 of the server and re-adoption."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import job_pids, wait_until
from tests.server.conftest import ServerProcess


def _phase(server: ServerProcess, name: str) -> str:
    out = server.cli("describe", name).stdout
    match = re.search(r"Status: (\w+)", out)
    return match.group(1) if match else ""


def test_seed_002_cli_v1_flow(server: ServerProcess, tmp_path: Path) -> None:
    sub = server.cli(
        "submit-dist",
        "pytorch",
        "mnist",
        "--workers",
        "2",
        "-g",
        "0.1",
        "--",
        "python",
        "-m",
        "ringleader.examples.digits",
        "--epochs",
        "4",
    )
    assert sub.returncode == 0, sub.stderr
    assert "submitted successfully" in sub.stdout
    logs = server.cli("logs", "mnist", "-f", timeout=240)
    assert logs.returncode == 0, logs.stderr
    assert re.search(r"^\[mnist-master-0\] final test accuracy: 0\.\d+", logs.stdout, re.M)
    assert re.search(r"^\[mnist-master-0\] epoch 4/4", logs.stdout, re.M)
    assert "RINGLEADER_BENCH" not in logs.stdout  # timing lines are for bench/ (--bench)
    wait_until(lambda: _phase(server, "mnist") == "Completed", 30, "Completed")
    listing = server.cli("list").stdout
    assert "mnist" in listing and "Completed" in listing and "PODs Running (Pending)" in listing
    assert "0.3)" in listing  # GPUs Allocated (Requested): 3 pods x 0.1
    described = server.cli("describe", "mnist").stdout
    assert "mnist-worker-1" in described and "Succeeded" in described
    assert server.cli("get", "mnist").stdout.count("mnist-master-0") >= 1
    deleted = server.cli("delete", "mnist")
    assert deleted.returncode == 0
    wait_until(
        lambda: server.cli("describe", "mnist").returncode != 0, 30, "the workload to be deleted"
    )


def test_cli_v2_and_projects(server: ServerProcess) -> None:
    created = server.cli("project", "create", "team-a", "--gpu", "2")
    assert created.returncode == 0, created.stderr
    assert server.cli("project", "set", "team-a").returncode == 0
    assert "Project: team-a" in server.cli("whoami").stdout
    sub = server.cli(
        "distributed",
        "submit",
        "v2job",
        "--framework",
        "PyTorch",
        "--workers",
        "1",
        "--gpu-request-type",
        "portion",
        "--gpu-portion-request",
        "0.1",
        "--gpu-devices-request",
        "1",
        "--cpu-memory-request",
        "100M",
        "--",
        "python",
        "-c",
        "print('hello v2')",
    )
    assert sub.returncode == 0, sub.stderr
    wait_until(
        lambda: "hello v2" in server.cli("distributed", "logs", "v2job").stdout, 60, "v2 logs"
    )
    assert "team-a" in server.cli("distributed", "list").stdout
    bad = server.cli("distributed", "submit", "Bad_Name", "--workers", "1", "--", "true")
    assert bad.returncode != 0 and "name" in bad.stderr
    missing = server.cli("project", "set", "nope")
    assert missing.returncode == 4 and "not found" in missing.stderr


def test_token_prints_a_bearer_token(server: ServerProcess) -> None:
    import httpx

    token = server.cli("token").stdout.strip()
    response = httpx.get(f"{server.url}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert response.json()["name"] == "admin"


WAIT_FOR_FILE = "import os, time\nprint('started', flush=True)\nwhile not os.path.exists({path!r}): time.sleep(0.05)\nprint('finished', flush=True)\n"


def test_kill_9_of_the_server_then_restart_readopts_running_workloads(
    server: ServerProcess, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script = tmp_path / "wait.py"
    script.write_text(WAIT_FOR_FILE.format(path=str(gate)))
    sub = server.cli(
        "submit-dist", "pytorch", "survivor", "--workers", "1", "--", "python", str(script)
    )
    assert sub.returncode == 0, sub.stderr
    wait_until(
        lambda: server.cli("logs", "survivor").stdout.count("started") == 2, 60, "both pods started"
    )
    server.kill()  # kill -9: the workload's detached supervisor must not care
    gate.write_text("go")
    server.start()
    wait_until(
        lambda: _phase(server, "survivor") == "Completed", 60, "the re-adopted workload to complete"
    )
    logs = server.cli("logs", "survivor").stdout
    assert logs.count("started") == 2 and logs.count("finished") == 2


def test_supervisor_dead_while_server_down_is_failed_with_reason(
    server: ServerProcess, tmp_path: Path
) -> None:
    import os
    import signal

    sub = server.cli(
        "submit-dist",
        "pytorch",
        "doomed",
        "--workers",
        "1",
        "--",
        "python",
        "-c",
        "import time; print('up', flush=True); time.sleep(300)",
    )
    assert sub.returncode == 0, sub.stderr
    wait_until(lambda: server.cli("logs", "doomed").stdout.count("up") == 2, 60, "both pods up")
    server.kill()
    state = json.loads(next((server.home / "runs").glob("*/state.json")).read_text())
    os.kill(state["pid"], signal.SIGKILL)
    server.start()
    wait_until(lambda: _phase(server, "doomed") == "Failed", 60, "Failed")
    assert "supervisor died" in server.cli("describe", "doomed").stdout
    run = next((server.home / "runs").glob("*/state.json")).parent.name
    wait_until(lambda: job_pids(f"rl-{run}") == [], 15, "no orphans")

"""Issue 12 item 4, with a real ``ringleader server`` process: SIGTERM ends the
server promptly while a ``logs?follow`` stream is open, and a run that ended
while the server was down gets its own end time as ``completedAt``."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import wait_until
from tests.server.conftest import ServerProcess

HOLD = "import os, time\nwhile not os.path.exists({gate!r}): time.sleep(0.05)\nprint('done')"


def http(server: ServerProcess) -> httpx.Client:
    creds = json.loads((server.home / "credentials.json").read_text())
    token = httpx.post(
        f"{server.url}/api/v1/token",
        json={"clientID": creds["clientId"], "clientSecret": creds["clientSecret"]},
    ).json()["accessToken"]
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


def submit_held(client: httpx.Client, name: str, gate: Path) -> str:
    """A one-pod workload that runs until ``gate`` exists; its id, once Running."""
    project = client.get("/api/v1/org-unit/projects/default").json()["id"]
    command = f"{sys.executable} -u -c {shlex.quote(HOLD.format(gate=str(gate)))}"
    body = {"name": name, "projectId": project, "spec": {"command": command, "numWorkers": 1}}
    answer = client.post("/api/v1/workloads/distributed", json=body)
    assert answer.status_code == 202, answer.text
    wid = answer.json()["workloadId"]
    wait_until(lambda: phase(client, wid) == "Running", timeout=90)
    return wid


def phase(client: httpx.Client, wid: str) -> str:
    return client.get(f"/api/v1/workloads/{wid}").json()["actualPhase"]


def test_sigterm_ends_the_server_while_a_follow_stream_is_open(server: ServerProcess) -> None:
    client = http(server)
    gate = server.home / "gate"
    wid = submit_held(client, "held", gate)
    opened = threading.Event()
    ended: list[Any] = []

    def follow() -> None:
        try:
            logs = f"/api/v1/workloads/{wid}/logs"
            with client.stream("GET", logs, params={"follow": True}) as response:
                opened.set()
                for _ in response.iter_bytes():  # until the server ends the stream
                    pass
        except httpx.HTTPError as exc:
            ended.append(exc)
        ended.append("done")

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    assert opened.wait(30)
    assert server.proc is not None
    server.proc.send_signal(signal.SIGTERM)
    # Ends on its own (the workload still runs): before, it waited for the stream,
    # which lasts until the workload ends.
    try:
        code = server.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("the server did not stop on SIGTERM with a follow open") from None
    assert code == -signal.SIGTERM
    reader.join(30)
    assert ended and not reader.is_alive()
    assert not (server.home / "server.json").exists()  # its record removed on the way out
    gate.touch()


def test_completed_at_after_a_restart_is_when_the_run_ended(server: ServerProcess) -> None:
    client = http(server)
    gate = server.home / "gate"
    wid = submit_held(client, "ends-while-down", gate)
    server.kill()  # down: nobody watches the run end
    gate.touch()
    state_file = next((server.home / "runs").glob("*/state.json"))
    wait_until(lambda: json.loads(state_file.read_text()).get("phase") == "Succeeded", timeout=60)
    run_ended = json.loads(state_file.read_text())["updated_at"]
    server.start()
    client = http(server)
    wait_until(lambda: phase(client, wid) == "Completed", timeout=60)
    completed = datetime.fromisoformat(
        client.get(f"/api/v1/workloads/{wid}").json()["completedAt"].replace("Z", "+00:00")
    )
    assert abs(completed.timestamp() - run_ended) < 1e-3  # equal, to the stored precision
    pods = client.get(f"/api/v1/workloads/{wid}/pods").json()["pods"]
    assert all(
        abs(datetime.fromisoformat(p["completedAt"]).timestamp() - run_ended) < 1e-3 for p in pods
    )

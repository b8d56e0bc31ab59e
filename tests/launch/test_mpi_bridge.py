"""The MPI bridge's relay between hosts, without containers: mpirun's rsh client on
the launcher's host asks for a pod another host runs; that host's bridge starts it
and its output and exit come back; the client's going stops it there.

The supervisor between the two agents is a direct call here (its relay is
``MPISupervisor._relay``); the pod is a plain process, not a container."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE, Popen
from typing import Any

import pytest

from ringleader.launch import mpi_bridge
from tests.conftest import wait_until


@pytest.fixture
def bridges(tmp_path: Path):
    head_dir, node_dir = tmp_path / "head", tmp_path / "node"
    head_dir.mkdir()
    node_dir.mkdir()
    (head_dir / mpi_bridge.CLIENT_FILE).write_text(mpi_bridge.CLIENT_SOURCE)
    pods = {"w-0": {"rank": 0, "env": {}, "node": 0}, "w-1": {"rank": 1, "env": {}, "node": 1}}
    started: list[tuple[str, list[str]]] = []

    def start(pod: str, argv: list[str]) -> Popen[bytes]:
        started.append((pod, argv))
        env = {**os.environ, "POD": pod}
        return Popen(argv, stdin=subprocess.DEVNULL, stdout=PIPE, stderr=PIPE, env=env,
                     start_new_session=True)  # fmt: skip

    sides: dict[int, mpi_bridge.Bridge] = {}

    def through_supervisor(to: int):
        def send(op: str, **fields: Any) -> None:
            sides[to].relayed({"op": op, **fields})

        return send

    uid = os.geteuid()
    sides[0] = mpi_bridge.Bridge(str(head_dir), pods, uid, start, through_supervisor(1))
    node_pods = {p: v for p, v in pods.items() if v["node"] == 1}
    sides[1] = mpi_bridge.Bridge(str(node_dir), node_pods, uid, start, through_supervisor(0),
                                 node=1, listen=False)  # fmt: skip
    yield head_dir, started
    for side in sides.values():
        side.close()
    assert not (node_dir / mpi_bridge.SOCKET_FILE).exists()  # only the head listens


def _client(head_dir: Path, *args: str) -> list[str]:
    return [sys.executable, str(head_dir / mpi_bridge.CLIENT_FILE), *args]


def test_a_pod_on_another_host_runs_there_and_its_output_and_exit_come_back(bridges) -> None:
    head_dir, started = bridges
    done = subprocess.run(_client(head_dir, "w-1", "echo out $POD; echo err >&2; exit 3"),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (3, "out w-1\n", "err\n")
    assert started == [("w-1", ["/bin/sh", "-c", "echo out $POD; echo err >&2; exit 3"])]
    here = subprocess.run(_client(head_dir, "w-0", "echo $POD"), capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert (here.returncode, here.stdout) == (0, "w-0\n")  # the head's own pod: started here


def test_the_clients_going_stops_the_pod_on_the_other_host(bridges, tmp_path: Path) -> None:
    head_dir, _ = bridges
    mark = tmp_path / "pid"
    client = Popen(_client(head_dir, "w-1", f"echo $$ > {mark}; exec sleep 300"))
    try:
        wait_until(lambda: mark.exists() and mark.read_text().strip(), 60, "the pod to start")
        pid = int(mark.read_text())
    finally:
        client.kill()
        client.wait()
    wait_until(lambda: not _alive(pid), 60, "the pod's command to be stopped")


def test_an_unknown_pod_is_refused_by_name(bridges) -> None:
    head_dir, started = bridges
    done = subprocess.run(_client(head_dir, "w-9", "id"), capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 255 and "no worker pod 'w-9' in this run" in done.stderr
    assert started == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False

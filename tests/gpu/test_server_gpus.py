"""The server's scheduler on real devices: a pod bound to one GPU sees exactly
that one (``CUDA_VISIBLE_DEVICES``), a pod without GPUs sees none, and a pod
given half a device cannot allocate more than about half of its memory.

Each workload has a master without GPUs (its own ``masterSpec``) and one
worker with the GPU request, so it fits on a machine with a single GPU.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from tests.server.conftest import ServerProcess

SHOW_DEVICES = """
import os, torch
print("visible=" + os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"), flush=True)
print(f"torch_devices={torch.cuda.device_count()}", flush=True)
"""

MEMORY_CAP = """
import torch
from ringleader.runtime import init

ctx = init()
if ctx.device.type == "cuda":
    total = torch.cuda.get_device_properties(ctx.device).total_memory
    below = torch.empty(int(total * 0.40), dtype=torch.uint8, device=ctx.device)
    print("below=ok", flush=True)
    del below
    torch.cuda.empty_cache()
    try:
        torch.empty(int(total * 0.60), dtype=torch.uint8, device=ctx.device)
        print("beyond=allocated", flush=True)
    except torch.cuda.OutOfMemoryError:
        print("beyond=oom", flush=True)
"""


class Client:
    """The REST API of a real server, as the admin (its first-run credentials)."""

    def __init__(self, server: ServerProcess) -> None:
        self.url = server.url
        creds = json.loads((server.home / "credentials.json").read_text())
        token = httpx.post(
            f"{self.url}/api/v1/token",
            json={"grantType": "client_credentials", "clientID": creds["clientId"],
                  "clientSecret": creds["clientSecret"]},
        ).json()["accessToken"]  # fmt: skip
        self.headers = {"Authorization": f"Bearer {token}"}

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", headers=self.headers, params=params, timeout=30)

    def run(self, tmp_path: Path, name: str, source: str, compute: dict[str, Any]) -> str:
        """Submit ``source`` (a worker with ``compute``, a master without GPUs), wait
        for its end, and return its merged logs."""
        script = tmp_path / f"{name}.py"
        script.write_text(source)
        body = {
            "name": name,
            "projectId": "default",
            "masterSpecSameAsWorker": False,
            "masterSpec": {"command": f"python {script}"},
            "spec": {"command": f"python {script}", "numWorkers": 1, "compute": compute},
        }
        response = httpx.post(
            f"{self.url}/api/v1/workloads/distributed", headers=self.headers, json=body
        )
        assert response.status_code == 202, response.text
        workload_id = response.json()["workloadId"]
        deadline = time.monotonic() + 300
        while (w := self.get(f"/api/v1/workloads/{workload_id}").json())["actualPhase"] not in (
            "Completed",
            "Failed",
            "Stopped",
        ):
            assert time.monotonic() < deadline, f"still {w['actualPhase']}: {w['phaseMessage']}"
            time.sleep(0.2)
        logs = self.get(f"/api/v1/workloads/{workload_id}/logs").text
        assert w["actualPhase"] == "Completed", f"{w['phaseMessage']}\n{logs}"
        return logs


def _pod_lines(logs: str, pod: str) -> list[str]:
    return [line.split("] ", 1)[1] for line in logs.splitlines() if line.startswith(f"[{pod}]")]


def test_a_one_gpu_pod_sees_exactly_its_device(server: ServerProcess, tmp_path: Path) -> None:
    client = Client(server)
    (node,) = client.get("/api/v1/nodes").json()
    assert node["gpuCount"] >= 1 and not any(g["simulated"] for g in node["gpus"]), node
    logs = client.run(tmp_path, "devices", SHOW_DEVICES, {"gpuDevicesRequest": 1})
    worker = _pod_lines(logs, "devices-worker-0")
    master = _pod_lines(logs, "devices-master-0")
    indices = {str(g["index"]) for g in node["gpus"]}
    (visible,) = [line.removeprefix("visible=") for line in worker if line.startswith("visible=")]
    assert visible in indices, logs  # one real device, by nvidia-smi's index
    assert "torch_devices=1" in worker, logs
    assert "visible=" in master and "torch_devices=0" in master, logs  # no GPU asked: none seen


def test_half_a_gpu_caps_the_pod_to_half_its_memory(server: ServerProcess, tmp_path: Path) -> None:
    client = Client(server)
    logs = client.run(
        tmp_path, "half", MEMORY_CAP, {"gpuRequestType": "portion", "gpuPortionRequest": 0.5}
    )
    worker = _pod_lines(logs, "half-worker-0")
    assert "below=ok" in worker, logs  # 40% of the device fits in its half
    assert "beyond=oom" in worker, logs  # 60% does not: the allocator refuses past 50%

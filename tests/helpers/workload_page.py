"""An API client, submissions and a jagged metrics run for the workload page's browser tests."""

from __future__ import annotations

import httpx

from tests.fixtures.browser import UI


def _api(ui: UI) -> httpx.Client:
    client_id, secret = ui.admin_key
    body = {"grantType": "client_credentials", "clientID": client_id, "clientSecret": secret}
    token = httpx.post(f"{ui.url}/api/v1/token", json=body).json()["accessToken"]
    return httpx.Client(base_url=ui.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _submit(api: httpx.Client, name: str, command: str, workers: int, **spec: object) -> str:
    project = api.get("/api/v1/org-unit/projects/default").json()["id"]
    body = {
        "name": name,
        "projectId": project,
        "spec": {"command": command, "numWorkers": workers, **spec},
    }
    answer = api.post("/api/v1/workloads/distributed", json=body)
    assert answer.status_code == 202, answer.text
    return answer.json()["workloadId"]


def _jagged_run(wid: str, start: float = 1000.0) -> dict:
    """A 48 s run's metrics: CPU and memory sampled all along, the ranks' rate reported
    every half second in its last 18 s only, jagged (100 and 300 samples/s in turn)."""

    def point(k: int, rank: int) -> dict:
        rate = 100.0 + 200 * (k % 2) + 20 * rank
        return {
            "attempt": 0,
            "step": k,
            "time": start + 30 + k / 2,
            "loss": 1.0,
            "samples": int(rate / 2),
            "samplesPerSecond": rate,
            "stepTime": 0.5,
        }

    pods = ["too-big-master-0", "too-big-worker-0"]
    series = [
        {"pod": pod, "rank": rank, "records": 37, "points": [point(k, rank) for k in range(37)]}
        for rank, pod in enumerate(pods)
    ]
    used = [
        {
            "pod": pod,
            "node": "vm",
            "points": [
                {"time": start + t, "cpu": 0.5, "memoryBytes": 200 << 20} for t in range(49)
            ],
        }
        for pod in pods
    ]
    return {"workloadId": wid, "collected": True, "series": series, "resources": used,
            "totalSamplesPerSecond": 420.0, "until": start + 48}  # fmt: skip

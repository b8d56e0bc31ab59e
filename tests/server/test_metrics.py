"""GET .../metrics against a real server: the digits example's ranks report, the server charts,
and every pod's CPU and memory, sampled by its agent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from statistics import mean

import httpx
import pytest

from tests.conftest import wait_until
from tests.helpers.metrics_api import _admin, _login
from tests.server.conftest import ServerProcess, running_server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("metrics") / "home") as proc:
        yield proc


def test_digits_ranks_report_a_falling_loss(served: ServerProcess) -> None:
    admin = _admin(served)
    project = admin.get("/api/v1/org-unit/projects/default").json()["id"]
    body = {
        "name": "digits",
        "projectId": project,
        "spec": {
            "command": "python -m ringleader.examples.digits --epochs 3 --no-checkpoint",
            "numWorkers": 2,
        },
    }
    submitted = admin.post("/api/v1/workloads/distributed", json=body)
    assert submitted.status_code == 202, submitted.text
    wid = submitted.json()["workloadId"]
    path = f"/api/v1/workloads/{wid}/metrics"

    def ended() -> str | None:
        phase = admin.get(f"/api/v1/workloads/{wid}").json()["actualPhase"]
        return phase if phase in {"Completed", "Failed"} else None

    assert wait_until(ended, 300, "the run to end") == "Completed"
    got = admin.get(path)
    assert got.status_code == 200, got.text
    metrics = got.json()
    assert metrics["collected"] is True
    series = {s["pod"]: s for s in metrics["series"]}
    pods = {p["name"] for p in admin.get(f"/api/v1/workloads/{wid}/pods").json()["pods"]}
    assert len(pods) == 3 and set(series) == pods  # the master and both workers
    for one in series.values():
        points = one["points"]
        assert len(points) >= 20 and one["records"] == len(points)
        assert [p["step"] for p in points] == sorted(p["step"] for p in points)
        losses = [p["loss"] for p in points]
        assert mean(losses[-5:]) < mean(losses[:5])  # it learns
        later = points[1:]
        assert all(p["stepTime"] > 0 and p["samplesPerSecond"] > 0 for p in later)
        assert all(p["samples"] == 32 and p["scalars"]["epoch"] >= 1 for p in points)
    assert metrics["totalSamplesPerSecond"] > 0
    # CPU and memory per pod (launch.podstats), on the node it was placed on.
    resources = {r["pod"]: r for r in metrics["resources"]}
    assert set(resources) == pods
    for one in resources.values():
        assert one["node"] and one["points"]
        assert all(p["memoryBytes"] > 0 for p in one["points"])
        assert all(p["cpu"] is None or p["cpu"] >= 0 for p in one["points"])
    assert metrics["until"] == max(
        p["time"] for s in [*series.values(), *resources.values()] for p in s["points"]
    )

    # Live updates: nothing newer than ``until``; a bounded number of points.
    nothing = admin.get(path, params={"since": metrics["until"]}).json()
    assert nothing["series"] == [] and nothing["until"] == metrics["until"]
    assert nothing["resources"] == []
    few = admin.get(path, params={"maxPoints": 5}).json()
    for one in few["series"]:
        assert len(one["points"]) <= 5 and one["points"][-1]["step"] == one["records"]
    assert all(len(one["points"]) <= 5 for one in few["resources"])
    assert admin.get(path, params={"since": "yesterday"}).status_code == 422
    assert admin.get(path, params={"maxPoints": 100000}).status_code == 422

    # Another user, in no project of this workload's: as for its logs, no such workload.
    made = admin.post("/api/v1/users", json={"username": "mallory"})
    assert made.status_code == 201, made.text
    mallory = _login(served, made.json()["clientId"], made.json()["clientSecret"])
    refused = httpx.get(f"{served.url}{path}", headers=mallory)
    assert refused.status_code == 404
    assert (
        httpx.get(f"{served.url}/api/v1/workloads/{wid}/logs", headers=mallory).status_code == 404
    )
    assert httpx.get(f"{served.url}{path}").status_code == 401


# Each rank holds 32 MiB and keeps a core busy until a sample of its pod shows them
# (or 2 minutes pass).
UNTIL_SAMPLED = """\
import json, os, time
folder, pod = os.environ["RINGLEADER_METRICS_DIR"], os.environ["RINGLEADER_POD"]
path = os.path.join(folder, f"pod-{pod}.resources.jsonl")
held = bytearray(32 << 20)
held[::4096] = b"x" * len(held[::4096])

def shown():
    try:
        text = open(path).read()
    except OSError:
        return False
    whole = [line for line in text.splitlines() if line.endswith("}")]  # not a torn one
    return any((json.loads(line).get("memoryBytes") or 0) > 32 << 20 for line in whole)

deadline = time.monotonic() + 120
while time.monotonic() < deadline and not shown():
    sum(range(100000))
"""


@pytest.mark.usefixtures("mpirun_available")
def test_mpi_worker_pods_are_measured_apart_from_mpirun(
    served: ServerProcess, tmp_path: Path
) -> None:
    """mpirun starts the ranks as its children: each worker pod is read from its own cgroup,
    the launcher pod is mpirun alone."""
    script = tmp_path / "until_sampled.py"
    script.write_text(UNTIL_SAMPLED)
    admin = _admin(served)
    project = admin.get("/api/v1/org-unit/projects/default").json()["id"]
    body = {
        "name": "mpi-busy",
        "projectId": project,
        "spec": {"command": f"python {script}", "numWorkers": 2, "distributedFramework": "MPI"},
    }
    submitted = admin.post("/api/v1/workloads/distributed", json=body)
    assert submitted.status_code == 202, submitted.text
    wid = submitted.json()["workloadId"]

    def ended() -> str | None:
        phase = admin.get(f"/api/v1/workloads/{wid}").json()["actualPhase"]
        return phase if phase in {"Completed", "Failed"} else None

    assert wait_until(ended, 300, "the MPI run to end") == "Completed"
    resources = {
        r["pod"]: r["points"]
        for r in admin.get(f"/api/v1/workloads/{wid}/metrics").json()["resources"]
    }
    assert set(resources) == {"mpi-busy-launcher", "mpi-busy-worker-0", "mpi-busy-worker-1"}
    for pod in ("mpi-busy-worker-0", "mpi-busy-worker-1"):
        assert max(p["memoryBytes"] for p in resources[pod]) > 32 << 20
    launcher = max(p["memoryBytes"] for p in resources["mpi-busy-launcher"])
    assert 0 < launcher < 64 << 20  # mpirun alone, without its ranks' 2 x 32 MiB

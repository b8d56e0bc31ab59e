"""cleanPodPolicy and interactive workloads through the API: phases and pods in the DB."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import job_pids, wait_until
from tests.server.conftest import API, SQLITE_ONLY

# The master waits for the worker to be up, then ends; the worker waits for a file.
MASTER_FIRST = """
import os, sys, time
from pathlib import Path
flag = Path(sys.argv[1])
if os.environ["RANK"] == "1":
    Path(f"{flag}.up").touch()
    while not flag.exists():
        time.sleep(0.05)
else:
    while not Path(f"{flag}.up").exists():
        time.sleep(0.05)
print("done", os.environ["RANK"], flush=True)
"""


def _pods(api: API, workload_id: str) -> dict[str, str]:
    return {
        p["name"]: p["status"]
        for p in api.get(f"/api/v1/workloads/{workload_id}/pods").json()["pods"]
    }


@SQLITE_ONLY
def test_none_policy_workload_completes_while_a_pod_runs_on(api: API, script, tmp_path) -> None:
    flag = tmp_path / "flag"
    response = api.submit("linger", f"python {script(MASTER_FIRST)} {flag}", cleanPodPolicy="None")
    assert response.status_code == 202, response.text
    wid = response.json()["workloadId"]
    done = api.wait_phase(wid, {"Completed", "Failed"})
    assert done["actualPhase"] == "Completed", done["phaseMessage"]
    assert "cleanPodPolicy None" in done["phaseMessage"]
    assert _pods(api, wid) == {"linger-master-0": "Succeeded", "linger-worker-0": "Running"}
    flag.touch()
    wait_until(
        lambda: _pods(api, wid)["linger-worker-0"] == "Succeeded", 30, "the worker's end recorded"
    )
    assert api.get(f"/api/v1/workloads/{wid}").json()["actualPhase"] == "Completed"
    wait_until(lambda: job_pids(f"rl-{wid}") == [], 10, "no process left")


@SQLITE_ONLY
def test_interactive_workload_stays_running_until_suspended(api: API, tmp_path: Path) -> None:
    response = api.submit("dev", "python -c print(1)", interactive=True)
    assert response.status_code == 202, response.text
    wid = response.json()["workloadId"]
    api.wait_phase(wid, {"Running"})
    wait_until(
        lambda: api.get(f"/api/v1/workloads/{wid}/logs").text.count("stays up") == 2,
        30,
        "both commands to end",
    )
    assert api.get(f"/api/v1/workloads/{wid}").json()["actualPhase"] == "Running"
    assert set(_pods(api, wid).values()) == {"Running"}
    assert api.post(f"/api/v1/workloads/distributed/{wid}/suspend").status_code == 202
    api.wait_phase(wid, {"Stopped"})
    assert job_pids(f"rl-{wid}") == []


def test_an_interactive_workload_may_have_no_command(api: API) -> None:
    body = {"name": "shell", "projectId": api.project_id(), "spec": {"numWorkers": 1}}
    batch = api.post("/api/v1/workloads/distributed", json=body)
    assert batch.status_code == 422 and "command" in batch.text
    body["spec"]["interactive"] = True
    accepted = api.post("/api/v1/workloads/distributed", json=body)
    assert accepted.status_code == 202, accepted.text
    wid = accepted.json()["workloadId"]
    api.wait_phase(wid, {"Running"})
    assert api.delete(f"/api/v1/workloads/distributed/{wid}").status_code == 202
    wait_until(lambda: job_pids(f"rl-{wid}") == [], 30, "no process left")

"""The REST API in-process with the real local backend: auth, submit, bad input.

Every test runs on SQLite and on PostgreSQL (the ``api`` fixture), except the
slow end-to-end training run marked ``@SQLITE_ONLY``.
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any

import httpx
import pytest

from ringleader.spec_limits import MAX_WORKERS
from tests.conftest import job_pids, wait_until
from tests.server.conftest import API, SQLITE_ONLY

SEED_002_BODY = {  # the seed's "API" tab, comments removed; its placeholders filled in by the test
    "name": "workload-name",
    "projectId": "<PROJECT-ID>",
    "clusterId": "<CLUSTER-UUID>",
    "spec": {
        "compute": {
            "cpuCoreRequest": 0.1,
            "gpuRequestType": "portion",
            "cpuMemoryRequest": "100M",
            "gpuDevicesRequest": 1,
            "gpuPortionRequest": 0.1,
        },
        "image": "kubeflow/pytorch-dist-mnist:latest",
        "numWorkers": 2,
        "distributedFramework": "PyTorch",
    },
}


def test_health_needs_no_token_everything_else_does(api: API) -> None:
    assert api.client.get("/healthz").json()["status"] == "ok"
    for path in ("/api/v1/workloads", "/api/v1/org-unit/projects", "/api/v1/me"):
        response = api.client.get(path)
        assert response.status_code == 401, path
    bad = api.client.get("/api/v1/workloads", headers={"Authorization": "Bearer not-a-token"})
    assert bad.status_code == 401


def test_credentials_file_is_0600_and_wrong_secret_is_401(api: API) -> None:
    mode = stat.S_IMODE(os.stat(api.home / "credentials.json").st_mode)
    assert mode == 0o600
    response = api.client.post(
        "/api/v1/token",
        json={
            "grantType": "client_credentials",
            "clientID": api.creds["clientId"],
            "clientSecret": "wrong",
        },
    )
    assert response.status_code == 401


def test_expired_token_is_401(api: API) -> None:
    from datetime import timedelta

    from ringleader.server.auth import token_digest
    from ringleader.server.db import utcnow
    from ringleader.server.models import Token

    with api.client.app.state.sessions() as s, s.begin():
        row = s.query(Token).filter(Token.token_hash == token_digest(api.token)).one()
        row.expires_at = utcnow() - timedelta(seconds=1)
    response = api.get("/api/v1/workloads")
    assert response.status_code == 401 and "expired" in response.json()["message"]


@SQLITE_ONLY  # a real training run (~9 s); the loops on PostgreSQL run the shorter ones below
def test_seed_002_body_runs_to_completed(api: API) -> None:
    cluster = api.get("/api/v1/clusters").json()[0]["uuid"]
    body = {**SEED_002_BODY, "projectId": api.project_id(), "clusterId": cluster}
    response = api.post("/api/v1/workloads/distributed", json=body)
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["name"] == "workload-name" and accepted["workloadId"]
    w = api.wait_phase(accepted["workloadId"], {"Completed", "Failed"}, timeout=180)
    assert w["actualPhase"] == "Completed", w["phaseMessage"]
    pods = api.get(f"/api/v1/workloads/{accepted['workloadId']}/pods").json()["pods"]
    assert [p["name"] for p in pods] == [
        "workload-name-master-0",
        "workload-name-worker-0",
        "workload-name-worker-1",
    ]
    assert all(p["status"] == "Succeeded" for p in pods)
    events = api.get(f"/api/v1/workloads/{accepted['workloadId']}/events").json()["events"]
    assert any(e["type"] == "ImageStandIn" for e in events)
    logs = api.get(f"/api/v1/workloads/{accepted['workloadId']}/logs").text
    assert "[workload-name-master-0] final test accuracy:" in logs


def _json(body: object) -> dict[str, Any]:
    """Request kwargs for a JSON body that may hold inf (httpx's json= refuses it)."""
    return {"content": json.dumps(body), "headers": {"Content-Type": "application/json"}}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": "Bad_Name"}, "name"),
        ({"spec": {"command": "true", "numWorkers": 0}}, "numWorkers"),
        (
            {"spec": {"command": "true", "numWorkers": 1, "compute": {"gpuPortionRequest": 1.5}}},
            "gpuPortionRequest",
        ),
        (
            {"spec": {"command": "true", "numWorkers": 1, "compute": {"cpuMemoryRequest": "lots"}}},
            "cpuMemoryRequest",
        ),
        (
            {"spec": {"command": "true", "numWorkers": 1, "distributedFramework": "Caffe"}},
            "distributedFramework",
        ),
        (  # a framework's own check (XGBoost pods take whole GPUs)
            {
                "spec": {
                    "command": "true",
                    "numWorkers": 1,
                    "distributedFramework": "XGBoost",
                    "compute": {
                        "gpuDevicesRequest": 1,
                        "gpuRequestType": "portion",
                        "gpuPortionRequest": 0.5,
                    },
                }
            },
            "gpuPortionRequest",
        ),
        ({"spec": {"command": "true", "numWorkers": 1, "image": "my/own:image;id"}}, "image"),
        ({"spec": {"numWorkers": 1}}, "command"),
        # Found while fuzzing: unbounded sizes made the server do unbounded work (a pod
        # row per worker) or made every later GET of the workload a 500 (float(10**400)).
        ({"spec": {"command": "true", "numWorkers": MAX_WORKERS + 1}}, "numWorkers"),
        ({"spec": {"command": "true", "numWorkers": 1, "slotsPerWorker": 10**6}}, "slotsPerWorker"),
        (
            {
                "spec": {
                    "command": "true",
                    "numWorkers": 1,
                    "compute": {"gpuDevicesRequest": 10**400},
                }
            },
            "gpuDevicesRequest",
        ),
        (
            {
                "spec": {
                    "command": "true",
                    "numWorkers": 1,
                    "compute": {"cpuMemoryRequest": "9" * 400 + "Mi"},
                }
            },
            "cpuMemoryRequest",
        ),
        # JSON's 1e999 is inf (sent as Infinity, which Python's parser takes too).
        (
            {"spec": {"command": "true", "numWorkers": 1, "compute": {"cpuCoreRequest": math.inf}}},
            "cpuCoreRequest",
        ),
    ],
)
def test_bad_input_is_422_naming_the_field_and_creates_nothing(
    api: API, change: dict, field: str
) -> None:
    body = {
        "name": "ok-name",
        "projectId": api.project_id(),
        "spec": {"command": "true", "numWorkers": 1},
    }
    body.update(change)
    response = api.post("/api/v1/workloads/distributed", **_json(body))
    assert response.status_code == 422, response.text
    assert field in response.text
    assert api.get("/api/v1/workloads/count").json()["count"] == 0


def test_duplicate_name_is_409_naming_the_existing_workload(api: API) -> None:
    first = api.submit("dup", "sleep 30")
    assert first.status_code == 202
    second = api.submit("dup", "true")
    assert second.status_code == 409
    assert (
        "dup" in second.json()["message"] and first.json()["workloadId"] in second.json()["message"]
    )
    assert api.get("/api/v1/workloads/count").json()["count"] == 1
    api.delete(f"/api/v1/workloads/distributed/{first.json()['workloadId']}")


def test_unknown_project_is_404(api: API) -> None:
    body = {
        "name": "x",
        "projectId": "no-such-project",
        "spec": {"command": "true", "numWorkers": 1},
    }
    assert api.post("/api/v1/workloads/distributed", json=body).status_code == 404


def test_failing_workload_fails_after_backoff_limit(api: API) -> None:
    response = api.submit("crash", "python -c 'import sys; sys.exit(3)'", backoffLimit=1)
    w = api.wait_phase(response.json()["workloadId"], {"Completed", "Failed"})
    assert w["actualPhase"] == "Failed"
    assert w["attempt"] == 1


def test_delete_while_running_leaves_no_processes(api: API) -> None:
    response = api.submit(
        "sleeper", "python -c 'import time; print(\"up\", flush=True); time.sleep(300)'"
    )
    wid = response.json()["workloadId"]
    api.wait_phase(wid, {"Running"})
    wait_until(
        lambda: "up" in api.get(f"/api/v1/workloads/{wid}/logs").text, 30, "the pod to print"
    )
    assert job_pids(f"rl-{wid}")
    assert api.delete(f"/api/v1/workloads/distributed/{wid}").status_code == 202
    wait_until(
        lambda: api.get(f"/api/v1/workloads/{wid}").status_code == 404, 30, "the workload to go"
    )
    assert job_pids(f"rl-{wid}") == []


def test_suspend_and_resume(api: API) -> None:
    response = api.submit("pausable", "python -c 'import time; time.sleep(300)'")
    wid = response.json()["workloadId"]
    api.wait_phase(wid, {"Running"})
    assert api.post(f"/api/v1/workloads/distributed/{wid}/suspend").status_code == 202
    api.wait_phase(wid, {"Stopped"})
    assert job_pids(f"rl-{wid}") == []
    assert api.post(f"/api/v1/workloads/distributed/{wid}/resume").status_code == 202
    api.wait_phase(wid, {"Running"})
    api.delete(f"/api/v1/workloads/distributed/{wid}")
    wait_until(lambda: job_pids(f"rl-{wid}") == [], 30, "the workload's processes to stop")


def test_a_resume_typed_right_after_a_suspend_is_kept_and_runs_it_again(api: API) -> None:
    # The rank ignores SIGTERM: the suspend's stop takes the grace, and the resume
    # arrives while the workload is still Stopping, as it does for a user who types
    # the two commands one after the other.
    stubborn = (
        "python -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        'print("ready", flush=True); time.sleep(300)\''
    )
    wid = api.submit("stubborn", stubborn).json()["workloadId"]
    api.wait_phase(wid, {"Running"})
    wait_until(
        lambda: "ready" in api.get(f"/api/v1/workloads/{wid}/logs").text, 30, "the rank to start"
    )
    first_run = job_pids(f"rl-{wid}")
    assert api.post(f"/api/v1/workloads/distributed/{wid}/suspend").status_code == 202
    resumed = api.post(f"/api/v1/workloads/distributed/{wid}/resume")
    assert resumed.status_code == 202, resumed.text
    assert (resumed.json()["actualPhase"], resumed.json()["desiredPhase"]) == (
        "Stopping",
        "Running",
    )
    wait_until(lambda: not set(first_run) & set(job_pids(f"rl-{wid}")), 60, "the first run to stop")
    api.wait_phase(wid, {"Running"})
    reasons = [e["reason"] for e in api.get(f"/api/v1/workloads/{wid}/events").json()["events"]]
    assert reasons.index("Suspended") < reasons.index("ResumeRequested") < reasons.index("Resumed")
    api.delete(f"/api/v1/workloads/distributed/{wid}")
    wait_until(lambda: job_pids(f"rl-{wid}") == [], 60, "the workload's processes to stop")


def test_list_filter_sort_and_page(api: API) -> None:
    ids = [api.submit(f"job-{i}", "true").json()["workloadId"] for i in range(3)]
    for wid in ids:
        api.wait_phase(wid, {"Completed"})
    page = api.get(
        "/api/v1/workloads", params={"sortBy": "name", "sortOrder": "asc", "limit": 2}
    ).json()
    assert [w["name"] for w in page["workloads"]] == ["job-0", "job-1"] and page["total"] == 3
    page = api.get(
        "/api/v1/workloads", params={"sortBy": "name", "sortOrder": "asc", "offset": 2}
    ).json()
    assert [w["name"] for w in page["workloads"]] == ["job-2"]
    only = api.get("/api/v1/workloads", params={"filterBy": "name==job-1"}).json()
    assert [w["name"] for w in only["workloads"]] == ["job-1"]
    contains = api.get("/api/v1/workloads", params={"filterBy": "name=@job"}).json()
    assert contains["total"] == 3
    assert api.get("/api/v1/workloads", params={"filterBy": "bogus"}).status_code == 422


def test_logs_per_pod_and_tail(api: API) -> None:
    script = "import os; [print(os.environ['RANK'], i) for i in range(5)]"
    wid = api.submit("talker", f'python -c "{script}"').json()["workloadId"]
    api.wait_phase(wid, {"Completed"})
    merged = api.get(f"/api/v1/workloads/{wid}/logs").text.splitlines()
    assert len(merged) == 10
    worker = api.get(f"/api/v1/workloads/{wid}/logs", params={"pod": "worker-0"}).text.splitlines()
    assert worker == [f"[talker-worker-0] 1 {i}" for i in range(5)]
    tail = api.get(
        f"/api/v1/workloads/{wid}/logs", params={"pod": "master-0", "tail": 2}
    ).text.splitlines()
    assert tail == ["[talker-master-0] 0 3", "[talker-master-0] 0 4"]
    assert api.get(f"/api/v1/workloads/{wid}/logs", params={"pod": "nope"}).status_code == 422


def test_projects_crud(api: API) -> None:
    created = api.post(
        "/api/v1/org-unit/projects",
        json={"name": "team-a", "resources": [{"nodePool": "default", "gpu": {"deserved": 2}}]},
    )
    assert created.status_code == 201
    assert api.post("/api/v1/org-unit/projects", json={"name": "team-a"}).status_code == 409
    assert api.post("/api/v1/org-unit/projects", json={"name": "Team A"}).status_code == 422
    pid = created.json()["id"]
    assert (
        api.get(f"/api/v1/org-unit/projects/{pid}").json()["resources"][0]["gpu"]["deserved"] == 2
    )
    updated = api.put(
        "/api/v1/org-unit/projects/team-a", json={"resources": [{"gpu": {"deserved": 4}}]}
    )
    assert updated.json()["resources"][0]["gpu"]["deserved"] == 4
    assert {p["name"] for p in api.get("/api/v1/org-unit/projects").json()["projects"]} == {
        "default",
        "team-a",
    }
    assert api.delete("/api/v1/org-unit/projects/team-a").status_code == 204
    assert api.get("/api/v1/org-unit/projects/team-a").status_code == 404


def test_other_users_see_only_their_projects(api: API) -> None:
    wid = api.submit("private", "true").json()["workloadId"]
    bob_headers = api.new_user("bob")
    assert api.client.get(f"/api/v1/workloads/{wid}", headers=bob_headers).status_code == 404
    assert api.client.get("/api/v1/workloads", headers=bob_headers).json()["total"] == 0
    body = {"name": "x", "projectId": "default", "spec": {"command": "true", "numWorkers": 1}}
    assert (
        api.client.post("/api/v1/workloads/distributed", json=body, headers=bob_headers).status_code
        == 404
    )
    assert (
        api.client.delete(f"/api/v1/workloads/distributed/{wid}", headers=bob_headers).status_code
        == 404
    )


# ----- regressions found while fuzzing the OpenAPI document (test_openapi_fuzz.py) -----


def _documented_422(response: httpx.Response) -> list[dict]:
    """The body of a 422 as the OpenAPI document declares it (HTTPValidationError)."""
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail and all({"loc", "msg", "type"} <= set(d) for d in detail), detail
    return detail


def test_our_422s_have_the_documented_shape(api: API) -> None:
    bogus = api.get("/api/v1/workloads", params={"filterBy": "bogus"})
    assert _documented_422(bogus) == [
        {"loc": ["filterBy"], "msg": bogus.json()["detail"][0]["msg"], "type": "value_error"}
    ]
    body = {"name": "x", "projectId": api.project_id(), "spec": {"numWorkers": 1}}
    no_command = api.post("/api/v1/workloads/distributed", json=body)
    assert _documented_422(no_command)[0]["loc"] == ["spec", "command"]
    _documented_422(api.get("/api/v1/workloads", params={"limit": 0}))  # FastAPI's own


def test_nul_in_a_key_is_404_or_422_never_500(api: API) -> None:
    """PostgreSQL text cannot hold NUL: a query with one raised (500) there."""
    assert api.get("/api/v1/workloads/a%00b").status_code == 404
    assert api.get("/api/v1/workloads/a%00b/logs").status_code == 404
    assert api.post("/api/v1/workloads/distributed/a%00b/suspend").status_code == 404
    assert api.get("/api/v1/org-unit/projects/a%00b").status_code == 404
    assert api.put("/api/v1/org-unit/projects/a%00b", json={"resources": []}).status_code == 404
    assert api.delete("/api/v1/org-unit/projects/a%00b").status_code == 404
    body = {"name": "x", "projectId": "a\x00b", "spec": {"command": "true", "numWorkers": 1}}
    assert api.post("/api/v1/workloads/distributed", json=body).status_code == 404
    _documented_422(api.get("/api/v1/workloads", params={"filterBy": "name==a\x00b"}))
    token = {"clientID": "a\x00b", "clientSecret": api.creds["clientSecret"]}
    _documented_422(api.client.post("/api/v1/token", json=token))


def test_offset_past_64_bits_is_422_and_the_largest_is_an_empty_page(api: API) -> None:
    """Both databases take a signed 64-bit OFFSET; past it SQLite and PostgreSQL raised (500)."""
    largest = 2**63 - 1
    page = api.get("/api/v1/workloads", params={"offset": largest, "sortBy": "name"})
    assert page.status_code == 200, page.text
    assert page.json()["workloads"] == [] and page.json()["offset"] == largest
    _documented_422(api.get("/api/v1/workloads", params={"offset": largest + 1}))


def test_created_at_filters_take_an_iso_time(api: API) -> None:
    """A non-time value (or =@) on createdAt raised in the database layer (500)."""
    api.submit("dated", "true")

    def count(expr: str) -> int:
        response = api.get("/api/v1/workloads/count", params={"filterBy": expr})
        assert response.status_code == 200, response.text
        return response.json()["count"]

    assert count("createdAt>=2000-01-01T00:00:00Z") == 1
    assert count("createdAt<=2000-01-01T00:00:00+02:00") == 0
    assert count("createdAt>=2000-01-01") == 1  # naive is UTC
    assert count("createdAt>=0001-01-01T00:00:00+14:00") == 1  # before datetime's UTC range
    assert count("createdAt>=9999-12-31T23:59:59-14:00") == 0  # after it
    for bad in ("createdAt<=not-a-time", "createdAt=@2024", "createdAt==5m"):
        detail = _documented_422(api.get("/api/v1/workloads", params={"filterBy": bad}))
        assert detail[0]["loc"] == ["filterBy"]


def test_contains_filter_is_literal_and_created_by_is_the_user_name(api: API) -> None:
    """``=@%`` matched every workload (a LIKE wildcard); createdBy compared the user's id."""
    api.submit("job-a", "true")
    api.submit("job-b", "true")

    def names(*filters: str, **params: str) -> list[str]:
        response = api.get("/api/v1/workloads", params={"filterBy": list(filters), **params})
        assert response.status_code == 200, response.text
        return [w["name"] for w in response.json()["workloads"]]

    assert names("name=@%") == [] and names("name=@_") == []
    assert sorted(names("name=@job-")) == ["job-a", "job-b"]
    listed = api.get("/api/v1/workloads").json()["workloads"]
    assert {w["createdBy"] for w in listed} == {"admin"}
    assert len(names("createdBy==admin")) == 2
    assert names("createdBy!=admin") == []
    assert names(sortBy="createdBy", sortOrder="asc")  # sorts by the name, without error


def test_infinite_quota_is_422_not_stored(api: API) -> None:
    """inf was stored as null on SQLite and raised on PostgreSQL (500)."""
    body = {"name": "inf", "resources": [{"gpu": {"deserved": math.inf}}]}
    detail = _documented_422(api.post("/api/v1/org-unit/projects", **_json(body)))
    assert detail[0]["loc"][-1] == "deserved"
    assert api.get("/api/v1/org-unit/projects/inf").status_code == 404


def test_logs_since_at_the_edges(api: API) -> None:
    """A duration of 400 digits overflowed a float (500); year-1/9999 times are valid."""
    wid = api.submit("edges", "python -c 'print(1); print(2)'").json()["workloadId"]
    api.wait_phase(wid, {"Completed"})

    def lines(since: str) -> list[str]:
        response = api.get(f"/api/v1/workloads/{wid}/logs", params={"since": since})
        assert response.status_code == 200, response.text
        return response.text.splitlines()

    everything = lines("")
    assert len(everything) == 4  # two lines from each of the master and the worker
    assert lines("1h") == everything
    assert lines("9" * 400 + "d") == everything  # further back than the epoch
    assert lines("0001-01-01T00:00:00+14:00") == everything  # before the epoch in UTC
    assert lines("0001-01-01T00:00:00") == everything  # naive: local time
    assert lines("9999-12-31T23:59:59-14:00") == []
    _documented_422(api.get(f"/api/v1/workloads/{wid}/logs", params={"since": "yesterday"}))


def test_the_document_says_what_routes_return(api: API) -> None:
    """Logs are text/plain (they were documented as JSON); /me and /count have schemas."""
    paths = api.get("/openapi.json").json()["paths"]  # the document needs a token too
    logs = paths["/api/v1/workloads/{workload_id}/logs"]["get"]["responses"]["200"]["content"]
    assert list(logs) == ["text/plain"]
    for path in ("/api/v1/me", "/api/v1/workloads/count"):
        schema = paths[path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert "$ref" in schema, (path, schema)
    assert api.get("/api/v1/me").json() == {
        "id": api.get("/api/v1/me").json()["id"],
        "name": "admin",
        "isAdmin": True,
        "projects": ["default"],
        "roles": {"default": "admin"},
    }

"""Scoped pod tokens (issue 22, finding 4): a workload's own process, holding the
token its pod gets (``RINGLEADER_TOKEN``), tries what a thief of that token would
try, and the server refuses each: minting an access key or a token, making a
user, changing memberships, acting on a workload of another project, even one of
its own user's; what stays is its own project's workloads.  When the workload
ends the token is a 401.

The attack runs in a real workload of a real root ``--run-as user`` server (the
``site`` fixture), as its tenant's OS account, with raw HTTP (the workload's
interpreter is the system's, without the CLI's dependencies); the same token is
then tried through the real CLI.  Unit tests below pin the gate itself.
"""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from ringleader.server.deps import POD_ROUTES, pod_may_reach
from tests.conftest import wait_until
from tests.fixtures.tenants import Site, tenant_site  # noqa: F401 (the fixture: site)
from tests.server.conftest import API

# Stdlib only: what a tenant's process in a pod can do with its token.
IN_POD = r"""
import json, os, sys, time, urllib.error, urllib.request
url, token = os.environ["RINGLEADER_URL"], os.environ["RINGLEADER_TOKEN"]
other_id, release = sys.argv[1], sys.argv[2]
def call(method, path, body=None, bearer=True):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method)
    if bearer:
        req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as answer:
            raw = answer.read()
            return answer.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as refused:
        return refused.code, None
out = {}
me_status, me = call("GET", "/api/v1/me")
out["me"] = me_status
user_id = me["id"]
out["access_key"] = call("POST", "/api/v1/access-keys", {"name": "forever"})[0]
out["list_keys"] = call("GET", "/api/v1/access-keys")[0]
out["user"] = call("POST", "/api/v1/users", {"username": "mallory"})[0]
out["users"] = call("GET", "/api/v1/users")[0]
out["logout_user"] = call("POST", f"/api/v1/users/{user_id}/logout")[0]
out["make_admin"] = call("PUT", f"/api/v1/users/{user_id}", {"isAdmin": True})[0]
out["exchange"] = call("POST", "/api/v1/token", {"grantType": "client_credentials",
                       "clientID": user_id, "clientSecret": token}, bearer=False)[0]
members = "/api/v1/org-unit/projects/default/members/" + user_id
out["promote"] = call("PUT", members, {"role": "admin"})[0]
out["join"] = call("PUT", "/api/v1/org-unit/projects/side/members/" + user_id,
                   {"role": "admin"})[0]
out["leave"] = call("DELETE", members)[0]
out["new_project"] = call("POST", "/api/v1/org-unit/projects", {"name": "mine"})[0]
out["nodes"] = call("GET", "/api/v1/nodes")[0]
out["other_describe"] = call("GET", "/api/v1/workloads/" + other_id)[0]
out["other_pods"] = call("GET", f"/api/v1/workloads/{other_id}/pods")[0]
out["other_logs"] = call("GET", f"/api/v1/workloads/{other_id}/logs")[0]
out["other_suspend"] = call("POST", f"/api/v1/workloads/distributed/{other_id}/suspend")[0]
out["other_delete"] = call("DELETE", "/api/v1/workloads/distributed/" + other_id)[0]
status, listed = call("GET", "/api/v1/workloads")
out["list"] = status
out["listed"] = sorted(w["name"] for w in listed["workloads"])
status, projects = call("GET", "/api/v1/org-unit/projects")
out["projects"] = sorted(p["name"] for p in projects["projects"])
own = [w for w in listed["workloads"] if w["name"] == "podtok"]
out["own_describe"] = call("GET", "/api/v1/workloads/" + own[0]["workloadId"])[0]
out["own_events"] = call("GET", "/api/v1/workloads/{}/events".format(own[0]["workloadId"]))[0]
print("RESULT " + json.dumps(out), flush=True)
print("TOKEN " + token, flush=True)
deadline = time.monotonic() + 300
while not os.path.exists(release) and time.monotonic() < deadline:
    time.sleep(0.2)  # the test tries the token through the CLI meanwhile
"""

REFUSED = {
    "access_key": 403, "list_keys": 403, "user": 403, "users": 403, "logout_user": 403,
    "make_admin": 403, "exchange": 401, "promote": 403, "join": 403, "leave": 403,
    "new_project": 403, "nodes": 403, "other_describe": 404, "other_pods": 404,
    "other_logs": 404, "other_suspend": 404, "other_delete": 404,
}  # fmt: skip


def _pod_cli(site: Site, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI with nothing but the pod's token (as in a pod)."""
    env = {k: v for k, v in site.server.env.items() if not k.startswith("RINGLEADER_CLIENT")}
    env["RINGLEADER_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "ringleader", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_pods_token_acts_on_its_own_projects_workloads_only_and_ends_with_them(
    site: Site,
) -> None:
    alice = site.user("podtok-alice")
    made = site.server.cli("project", "create", "side")
    assert made.returncode == 0, made.stderr
    joined = site.server.cli("user", "assign", "podtok-alice", "side", "--role", "researcher")
    assert joined.returncode == 0, joined.stderr
    # Her own workload in another project: her pod in default must not reach it.
    sub = site.as_user(alice, "submit-dist", "pytorch", "sidejob", "-p", "side", "--workers",
                       "1", "--", "sleep", "600")  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    side_id = site.workload_id("sidejob")
    release = site.scripts / "release-podtok"
    script = site.script("podtok.py", IN_POD)
    site.submit(alice, "podtok", "python", script, side_id, str(release))

    logs = site.wait_logs("podtok", "TOKEN ")
    result = json.loads(logs.split("RESULT ", 1)[1].splitlines()[0])
    token = logs.split("TOKEN ", 1)[1].split()[0]
    assert {key: result[key] for key in REFUSED} == REFUSED, result
    assert result["me"] == 200 and result["own_describe"] == 200 and result["own_events"] == 200
    assert result["listed"] == ["podtok"], result  # not sidejob: another project
    assert result["projects"] == ["default"], result

    # The same token through the real CLI, while its workload runs.
    assert _pod_cli(site, token, "describe", "podtok").returncode == 0
    listed = _pod_cli(site, token, "list", "-A")
    assert listed.returncode == 0 and "podtok" in listed.stdout, listed
    assert "sidejob" not in listed.stdout
    for attempt in (
        ("access-key", "create", "forever"),
        ("user", "create", "mallory"),
        ("user", "assign", "podtok-alice", "side", "--role", "admin"),
        ("describe", "sidejob", "-p", "side"),
        ("delete", "sidejob", "-p", "side"),
    ):
        refused = _pod_cli(site, token, *attempt)
        assert refused.returncode != 0, (attempt, refused.stdout)
    assert "Running" in site.server.cli("describe", "sidejob", "-p", "side").stdout

    release.touch()
    site.wait_phase("podtok", "Completed")
    after = httpx.get(
        f"{site.server.url}/api/v1/workloads", headers={"Authorization": f"Bearer {token}"}
    )
    assert after.status_code == 401, after.text
    ended = _pod_cli(site, token, "list")
    assert ended.returncode != 0 and "RINGLEADER_TOKEN was refused" in ended.stderr
    assert site.server.cli("delete", "sidejob", "-p", "side").returncode == 0


# ----- unit: the gate, on the in-process app ----------------------------------------------
@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/api/v1/workloads", True),
        ("DELETE", "/api/v1/workloads/distributed/{workload_id}", True),
        ("GET", "/api/v1/workloads/{workload_id}/logs", True),
        ("HEAD", "/api/v1/me", True),
        ("POST", "/api/v1/access-keys", False),
        ("GET", "/api/v1/access-keys", False),
        ("POST", "/api/v1/users", False),
        ("PUT", "/api/v1/org-unit/projects/{key}/members/{member}", False),
        ("GET", "/api/v1/org-unit/projects/{key}/members", False),
        ("POST", "/api/v1/org-unit/projects", False),
        ("GET", "/api/v1/workloadsX", False),  # a prefix is not a path
        ("GET", "/api/v1/some-route-added-later", False),
    ],
)
def test_the_gate_opens_only_the_workload_routes_and_a_few_reads(
    method: str, path: str, allowed: bool
) -> None:
    assert pod_may_reach(method, path) is allowed


def test_besides_workloads_a_pod_reads_only_except_its_own_logout() -> None:
    assert all(method == "GET" or path == "/api/v1/token" for method, path in POD_ROUTES)


def _pod_token(api: API, name: str) -> tuple[str, str]:
    """A running workload of the admin's in default, and a token as its pods get."""
    from ringleader.server.auth import issue_pod_token
    from ringleader.server.models import Workload

    submitted = api.submit(name, "sleep 600")
    assert submitted.status_code == 202, submitted.text
    workload_id = submitted.json()["workloadId"]
    api.wait_phase(workload_id, {"Running"})  # placed: the placer issued its own already
    with api.client.app.state.sessions() as s, s.begin():
        token = issue_pod_token(s, s.get(Workload, workload_id), ttl_s=600)
    assert token is not None
    return workload_id, token


def test_an_admins_pod_token_is_no_admin_and_sees_no_other_project(api: API) -> None:
    other = api.post("/api/v1/org-unit/projects", json={"name": "other"})
    assert other.status_code == 201, other.text
    elsewhere = api.submit("elsewhere", "sleep 600", project="other").json()["workloadId"]
    own, token = _pod_token(api, "mine")
    pod = {"Authorization": f"Bearer {token}"}
    assert api.client.get(f"/api/v1/workloads/{own}", headers=pod).status_code == 200
    assert api.client.get(f"/api/v1/workloads/{elsewhere}", headers=pod).status_code == 404
    listed = api.client.get("/api/v1/workloads", headers=pod).json()["workloads"]
    assert [w["name"] for w in listed] == ["mine"]
    submit_elsewhere = api.client.post(
        "/api/v1/workloads/distributed",
        headers=pod,
        json={
            "name": "x",
            "projectId": other.json()["id"],
            "spec": {"command": "true", "numWorkers": 1},
        },
    )
    assert submit_elsewhere.status_code == 404, submit_elsewhere.text
    refused = api.client.post("/api/v1/access-keys", headers=pod, json={"name": "k"})
    assert refused.status_code == 403 and "pod's token" in refused.json()["message"], refused.text
    assert api.client.post("/api/v1/users", headers=pod, json={"username": "m"}).status_code == 403
    for docs in ("/docs", "/redoc", "/openapi.json"):  # the user's own documents, not a pod's
        assert api.client.get(docs, headers=pod).status_code == 403, docs
    assert api.client.get("/docs", headers=api.headers).status_code == 200
    # Nor is it a UI session: sent as the session cookie, the admin pages ask for a login.
    from ringleader.server.ui.session import SESSION_COOKIE

    api.client.cookies.set(SESSION_COOKIE, token)
    try:
        page = api.client.get("/admin/users", follow_redirects=False)
    finally:
        api.client.cookies.clear()
    assert page.status_code == 401 and "log in" in page.text, (page.status_code, page.text[:300])
    api.delete(f"/api/v1/workloads/distributed/{own}")  # Deleting: its token goes with it
    wait_until(lambda: api.client.get("/api/v1/me", headers=pod).status_code == 401, 60)
    api.delete(f"/api/v1/workloads/distributed/{elsewhere}")

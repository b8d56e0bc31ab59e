"""Users, project roles and access keys through the REST API, on SQLite and PostgreSQL.

What is pinned: only global admins manage users; a project's roles decide who
may see, run and manage (viewer < researcher < admin); a secret is shown
once and never again; revoking a key or a token ends it at once; bad input
is a 4xx naming the field and creates nothing.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ringleader.server.exec_session import STATUS
from ringleader.server.services import users as users_service
from tests.server.conftest import API


def _token(api: API, client_id: str, secret: str) -> httpx.Response:
    body = {"grantType": "client_credentials", "clientID": client_id, "clientSecret": secret}
    return api.client.post("/api/v1/token", json=body)


def _login(api: API, created: dict[str, Any]) -> dict[str, str]:
    response = _token(api, created["clientId"], created["clientSecret"])
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['accessToken']}"}


def _create_user(api: API, username: str, **fields: Any) -> dict[str, Any]:
    response = api.post("/api/v1/users", json={"username": username, **fields})
    assert response.status_code == 201, response.text
    return response.json()


def _assign(api: API, project: str, user: str, role: str, **kw: Any) -> httpx.Response:
    path = f"/api/v1/org-unit/projects/{project}/members/{user}"
    return api.put(path, json={"role": role}, **kw)


def _field(response: httpx.Response) -> list[str]:
    assert response.status_code == 422, response.text
    return [".".join(str(p) for p in d["loc"]) for d in response.json()["detail"]]


def test_admin_creates_lists_changes_and_removes_users(api: API) -> None:
    alice = _create_user(api, "alice", osUser="alice")
    assert alice["username"] == "alice" and alice["osUser"] == "alice"
    assert not alice["isAdmin"] and alice["projects"] == []
    secret = alice["clientSecret"]
    headers = _login(api, alice)  # the key a user is created with works at once
    assert api.client.get("/api/v1/me", headers=headers).json()["name"] == "alice"

    listed = api.get("/api/v1/users")
    assert [u["username"] for u in listed.json()] == ["admin", "alice"]
    one = api.get("/api/v1/users/alice")
    assert one.json()["id"] == alice["id"] and api.get(f"/api/v1/users/{alice['id']}").is_success
    for response in (listed, one):  # never echoed again
        assert secret not in response.text and "clientSecret" not in response.text

    changed = api.put("/api/v1/users/alice", json={"osUser": None, "isAdmin": True})
    assert changed.json()["osUser"] is None and changed.json()["isAdmin"] is True
    kept = api.put("/api/v1/users/alice", json={"isAdmin": False})
    assert kept.json()["osUser"] is None and kept.json()["isAdmin"] is False

    taken = api.post("/api/v1/users", json={"username": "alice"})
    assert taken.status_code == 409 and "alice" in taken.json()["message"]

    assert api.delete("/api/v1/users/alice").status_code == 204
    assert api.get("/api/v1/users/alice").status_code == 404
    assert api.client.get("/api/v1/me", headers=headers).status_code == 401  # its tokens went
    assert _token(api, alice["clientId"], secret).status_code == 401  # and its keys


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"username": ""}, "body.username"),
        ({"username": "al ice"}, "body.username"),
        ({"username": "a" * 256}, "body.username"),
        ({"username": "bob", "osUser": "Bob"}, "body.osUser"),
        ({"username": "bob", "osUser": "-bob"}, "body.osUser"),
        ({"username": "bob", "osUser": "b" * 33}, "body.osUser"),
        ({"username": "bob", "isAdmin": "maybe"}, "body.isAdmin"),
    ],
)
def test_bad_user_input_names_the_field_and_creates_nothing(
    api: API, body: dict[str, Any], field: str
) -> None:
    assert field in _field(api.post("/api/v1/users", json=body))
    assert [u["username"] for u in api.get("/api/v1/users").json()] == ["admin"]


def test_only_global_admins_manage_users(api: API) -> None:
    bob = _login(api, _create_user(api, "bob"))
    refused = api.client.post("/api/v1/users", json={"username": "eve"}, headers=bob)
    assert refused.status_code == 403 and "admin" in refused.json()["message"]
    assert api.client.get("/api/v1/users", headers=bob).status_code == 403
    assert api.client.get("/api/v1/users/admin", headers=bob).status_code == 403
    assert (
        api.client.put("/api/v1/users/bob", json={"isAdmin": True}, headers=bob).status_code == 403
    )
    assert api.client.delete("/api/v1/users/admin", headers=bob).status_code == 403
    assert api.client.get("/api/v1/users/bob", headers=bob).json()["username"] == "bob"  # itself
    assert [u["username"] for u in api.get("/api/v1/users").json()] == ["admin", "bob"]


def test_there_is_always_an_admin(api: API) -> None:
    demoted = api.put("/api/v1/users/admin", json={"isAdmin": False})
    assert demoted.status_code == 409 and "last admin" in demoted.json()["message"]
    assert api.delete("/api/v1/users/admin").status_code == 409
    _create_user(api, "root2", isAdmin=True)
    assert api.put("/api/v1/users/admin", json={"isAdmin": False}).json()["isAdmin"] is False


def _status(ws: Any) -> dict[str, Any]:
    data = ws.receive_bytes()
    assert data[0] == STATUS, data
    return json.loads(data[1:])


def test_roles_decide_who_sees_runs_and_manages(api: API) -> None:
    assert api.post("/api/v1/org-unit/projects", json={"name": "team-a"}).status_code == 201
    viewer = _login(api, _create_user(api, "vic"))
    researcher = _login(api, _create_user(api, "rae"))
    lead = _login(api, _create_user(api, "lea"))
    for name, role in (("vic", "viewer"), ("rae", "researcher"), ("lea", "admin")):
        assigned = _assign(api, "team-a", name, role)
        assert assigned.json() == {
            "userId": assigned.json()["userId"],
            "username": name,
            "role": role,
        }
    members = api.get("/api/v1/org-unit/projects/team-a/members").json()
    assert {m["username"]: m["role"] for m in members} == {
        "admin": "admin", "vic": "viewer", "rae": "researcher", "lea": "admin",
    }  # fmt: skip
    wid = api.submit("shared", "true", project="team-a").json()["workloadId"]

    # A viewer sees everything in the project ...
    assert api.client.get("/api/v1/workloads", headers=viewer).json()["total"] == 1
    for path in ("", "/pods", "/events", "/logs"):
        seen = api.client.get(f"/api/v1/workloads/{wid}{path}", headers=viewer)
        assert seen.status_code == 200, (path, seen.text)
    # ... and changes nothing: 403 naming the role it would need.
    body = {"name": "mine", "projectId": "team-a", "spec": {"command": "true", "numWorkers": 1}}
    refused = api.client.post("/api/v1/workloads/distributed", json=body, headers=viewer)
    assert refused.status_code == 403, refused.text
    assert "viewer" in refused.json()["message"] and "researcher" in refused.json()["message"]
    for verb in ("suspend", "resume"):
        path = f"/api/v1/workloads/distributed/{wid}/{verb}"
        assert api.client.post(path, headers=viewer).status_code == 403
    gone = api.client.delete(f"/api/v1/workloads/distributed/{wid}", headers=viewer)
    assert gone.status_code == 403
    with api.client.websocket_connect(
        f"/api/v1/workloads/{wid}/exec?command=true", headers=viewer
    ) as ws:
        assert _status(ws)["code"] == 403
    assert _assign(api, "team-a", "rae", "viewer", headers=viewer).status_code == 403
    assert api.client.get("/api/v1/workloads", headers=viewer).json()["total"] == 1  # unchanged

    # A researcher runs workloads but manages no members.
    ran = api.client.post("/api/v1/workloads/distributed", json=body, headers=researcher)
    assert ran.status_code == 202, ran.text
    stop = api.client.delete(f"/api/v1/workloads/distributed/{wid}", headers=researcher)
    assert stop.status_code == 202
    assert _assign(api, "team-a", "vic", "admin", headers=researcher).status_code == 403

    # A project admin manages members, and nothing global.
    assert _assign(api, "team-a", "vic", "researcher", headers=lead).json()["role"] == "researcher"
    quota = {"resources": [{"nodePool": "default", "gpu": {"deserved": 9}}]}
    put = api.client.put("/api/v1/org-unit/projects/team-a", json=quota, headers=lead)
    assert put.status_code == 403
    assert api.client.get("/api/v1/users", headers=lead).status_code == 403
    other = api.client.put(
        "/api/v1/org-unit/projects/default/members/vic", json={"role": "admin"}, headers=lead
    )
    assert other.status_code == 404  # not its project: not even its existence is told
    removed = api.client.delete("/api/v1/org-unit/projects/team-a/members/vic", headers=lead)
    assert removed.status_code == 204
    assert api.client.get("/api/v1/workloads", headers=viewer).json()["total"] == 0
    assert api.get("/api/v1/users/vic").json()["projects"] == []
    rae = api.get("/api/v1/users/rae").json()["projects"]
    assert [(p["projectName"], p["role"]) for p in rae] == [("team-a", "researcher")]


def test_bad_member_input_is_a_4xx(api: API) -> None:
    _create_user(api, "bob")
    assert _field(_assign(api, "default", "bob", "owner")) == ["body.role"]
    assert _assign(api, "default", "nobody", "viewer").status_code == 404
    assert _assign(api, "no-such-project", "bob", "viewer").status_code == 404
    missing = api.delete("/api/v1/org-unit/projects/default/members/bob")
    assert missing.status_code == 404
    assert [m["username"] for m in api.get("/api/v1/org-unit/projects/default/members").json()] == [
        "admin"
    ]


def test_users_manage_their_own_access_keys(api: API, monkeypatch: pytest.MonkeyPatch) -> None:
    bob = _login(api, _create_user(api, "bob"))
    made = api.client.post("/api/v1/access-keys", json={"name": "ci"}, headers=bob)
    assert made.status_code == 201, made.text
    key = made.json()
    assert key["name"] == "ci" and key["clientId"] and key["clientSecret"]
    listed = api.client.get("/api/v1/access-keys", headers=bob)
    assert [k["name"] for k in listed.json()["accessKeys"]] == ["default", "ci"]
    assert key["clientSecret"] not in listed.text and "clientSecret" not in listed.text
    one = api.client.get(f"/api/v1/access-keys/{key['id']}", headers=bob).json()
    assert one["clientId"] == key["clientId"] and "clientSecret" not in one

    same = api.client.post("/api/v1/access-keys", json={"name": "ci"}, headers=bob)
    assert same.status_code == 409
    bad = api.client.post("/api/v1/access-keys", json={"name": "CI key"}, headers=bob)
    assert _field(bad) == ["body.name"]
    monkeypatch.setattr(users_service, "MAX_KEYS", 2)
    full = api.client.post("/api/v1/access-keys", json={"name": "third"}, headers=bob)
    assert full.status_code == 409 and "revoke one" in full.json()["message"]

    # Another user's key is not found (not even for its id), except by a global admin.
    assert api.get("/api/v1/access-keys").json()["accessKeys"][0]["name"] == "bootstrap"
    admins = api.get("/api/v1/access-keys").json()["accessKeys"][0]["id"]
    assert api.client.delete(f"/api/v1/access-keys/{admins}", headers=bob).status_code == 404

    # Revoking a key ends the tokens it gave, and it gives no more.
    with_key = _login(api, key)
    assert api.client.get("/api/v1/me", headers=with_key).status_code == 200
    assert api.client.delete(f"/api/v1/access-keys/{key['id']}", headers=bob).status_code == 204
    assert api.client.get("/api/v1/me", headers=with_key).status_code == 401
    assert _token(api, key["clientId"], key["clientSecret"]).status_code == 401
    assert api.client.get("/api/v1/me", headers=bob).status_code == 200  # other keys' tokens live


def test_tokens_can_be_revoked(api: API) -> None:
    bob_user = _create_user(api, "bob")
    first, second = _login(api, bob_user), _login(api, bob_user)
    assert api.client.delete("/api/v1/token", headers=first).status_code == 204
    assert api.client.get("/api/v1/me", headers=first).status_code == 401
    assert api.client.get("/api/v1/me", headers=second).status_code == 200

    refused = api.client.post("/api/v1/users/admin/logout", headers=second)
    assert refused.status_code == 403
    assert api.post("/api/v1/users/bob/logout").status_code == 204  # an admin ends them all
    assert api.client.get("/api/v1/me", headers=second).status_code == 401
    again = _login(api, bob_user)  # the key itself still works
    assert api.client.post("/api/v1/users/bob/logout", headers=again).status_code == 204
    assert api.client.get("/api/v1/me", headers=again).status_code == 401


def test_a_removed_users_workloads_stay(api: API) -> None:
    rae = _login(api, _create_user(api, "rae"))
    assert _assign(api, "default", "rae", "researcher").status_code == 200
    body = {"name": "raes", "projectId": "default", "spec": {"command": "true", "numWorkers": 1}}
    wid = api.client.post("/api/v1/workloads/distributed", json=body, headers=rae).json()
    assert api.get(f"/api/v1/workloads/{wid['workloadId']}").json()["createdBy"] == "rae"
    assert api.delete("/api/v1/users/rae").status_code == 204
    kept = api.get(f"/api/v1/workloads/{wid['workloadId']}")
    assert kept.status_code == 200 and kept.json()["createdBy"] is None
    members = api.get("/api/v1/org-unit/projects/default/members").json()
    assert [m["username"] for m in members] == ["admin"]

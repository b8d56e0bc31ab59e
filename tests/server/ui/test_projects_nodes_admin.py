"""The projects, nodes and admin pages, in-process (fast) on both databases:
visibility, CSRF, bad input, a secret shown once, bars with their numbers."""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from ringleader.server.models import AccessKey, Node
from ringleader.server.services import ui_pages
from ringleader.server.services.users import find_user
from tests.server.conftest import API
from tests.server.ui import forms
from tests.server.ui.forms import HTML


def login(api: API, client_id: str, secret: str) -> None:
    """Log the in-process client in through the login form (its cookie replaces any other)."""
    forms.login(api, client_id, secret)


def login_admin(api: API) -> None:
    login(api, api.creds["clientId"], api.creds["clientSecret"])


def csrf(api: API, path: str = "/projects") -> str:
    page = api.client.get(path, headers=HTML)
    return re.search(r'name="csrf-token" content="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]


def post(api: API, path: str, token: str, **data: Any) -> httpx.Response:
    return api.client.post(
        path, data={"csrf_token": token, **data}, headers=HTML, follow_redirects=False
    )


def new_user(api: API, name: str, project: str | None = None, role: str = "researcher") -> dict:
    """A user made through the API (its key in the answer), a member of ``project``."""
    created = api.post("/api/v1/users", json={"username": name})
    assert created.status_code == 201, created.text
    if project:
        path = f"/api/v1/org-unit/projects/{project}/members/{name}"
        assert api.put(path, json={"role": role}).status_code == 200
    return created.json()


def text(html: str) -> str:
    """A page's words, tags and runs of spaces gone (what a reader sees)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def shown_projects(html: str) -> list[str]:
    return re.findall(r'<h2 id="p-[^"]+">([^<\s]+)', html)


# ----- projects and nodes -------------------------------------------------------------


def test_projects_and_nodes_show_quota_fair_share_and_fractions_to_whom_may_see(sim_api: API):
    api = sim_api
    team_a = {
        "name": "team-a",
        "resources": [
            {
                "nodePool": "default",
                "gpu": {"deserved": 2, "limit": 3, "overQuotaWeight": 2},
                "cpu": {"deserved": 4},
                "memory": {"deserved": 64000},  # MB, as the API takes it
            }
        ],
    }
    assert api.post("/api/v1/org-unit/projects", json=team_a).status_code == 201
    team_b = {"name": "team-b", "resources": [{"gpu": {"deserved": 1}}]}
    assert api.post("/api/v1/org-unit/projects", json=team_b).status_code == 201
    compute = {"gpuDevicesRequest": 1, "gpuRequestType": "portion", "gpuPortionRequest": 0.5}
    submitted = api.submit("half-gpu", "sleep 120", project="team-a", compute=compute)
    assert submitted.status_code == 202, submitted.text
    running = api.wait_phase(submitted.json()["workloadId"], {"Running"})
    held = running["allocatedGpus"]
    assert held > 0

    # The figures are the scheduler's: allocation = usage, fair share = demand here.
    with api.client.app.state.sessions() as s:
        rows = {r.project.name: r for r in ui_pages.projects(s, find_user(s, "admin"))}
    gpu = rows["team-a"].pools[0].lines[0]
    assert (gpu.resource, gpu.deserved, gpu.limit, gpu.weight) == ("gpu", 2, 3, 2)
    assert gpu.allocated == held and gpu.fair_share == held and gpu.capacity == 4
    assert [line.resource for line in rows["team-a"].pools[0].lines] == ["gpu", "cpu", "memory"]
    assert [line.resource for line in rows["team-b"].pools[0].lines] == ["gpu"]  # no CPU quota
    assert not rows["default"].managed

    login_admin(api)
    page = api.client.get("/projects", headers=HTML)
    assert page.status_code == 200
    words = text(page.text)
    assert shown_projects(page.text) == ["default", "team-a", "team-b"]
    assert f"GPUs in pool default: {held:g} allocated, 2 deserved, fair share {held:g}" in page.text
    assert "no quota" in words and "no limit" in words
    assert "Memory in pool default: 0 allocated, 64G deserved" in page.text
    # A bar: SVG widths (no style attribute), and the same numbers as words.
    widths = re.findall(r'class="bar-fill" x="0" y="3" width="([0-9.]+)"', page.text)
    assert 100 * held / 4 in [float(w) for w in widths]
    assert "style=" not in page.text

    nodes = text(api.client.get("/nodes", headers=HTML).text)
    assert "simulated" in nodes and "Ready" in nodes
    assert f"{held:g} by half-gpu in project team-a" in nodes
    assert "GPU 0" in nodes and "(free)" in nodes

    # A researcher of team-b: only team-b; the GPU's holder counted, not named.
    bob = new_user(api, "bob", "team-b")
    login(api, bob["clientId"], bob["clientSecret"])
    page = api.client.get("/projects", headers=HTML).text
    assert shown_projects(page) == ["team-b"] and "your role: researcher" in page
    assert "team-a" not in page
    nodes = text(api.client.get("/nodes", headers=HTML).text)
    assert "half-gpu" not in nodes and "team-a" not in nodes
    assert f"{held:g} by workloads of other projects" in nodes

    # A node that is not ready says so, with the reason in words.
    with api.client.app.state.sessions() as s, s.begin():
        s.execute(update(Node).values(ready=False, message="probe failed: host unreachable"))
    nodes = text(api.client.get("/nodes", headers=HTML).text)
    assert "NotReady Not ready: probe failed: host unreachable" in nodes


def test_projects_page_says_what_to_do_when_there_are_none(api: API):
    carol = new_user(api, "carol")
    login(api, carol["clientId"], carol["clientSecret"])
    page = api.client.get("/projects", headers=HTML)
    assert page.status_code == 200
    assert "You are not a member of any project yet — ask an admin" in text(page.text)


# ----- admin pages ---------------------------------------------------------------------


def test_a_non_admin_gets_403_on_admin_pages_and_its_posts_change_nothing(api: API):
    bob = new_user(api, "bob", "default")
    login(api, bob["clientId"], bob["clientSecret"])
    for path in ("/admin/users", f"/admin/users/{bob['id']}"):
        answer = api.client.get(path, headers=HTML)
        assert answer.status_code == 403 and "only an admin" in answer.text
    assert 'href="/admin/users"' not in api.client.get("/projects", headers=HTML).text
    token = csrf(api)  # bob's own valid token: still refused
    refused = [
        post(api, "/admin/users", token, username="mallory", is_admin="on"),
        post(api, f"/admin/users/{bob['id']}/keys", token, name="extra"),
        post(api, f"/admin/users/{bob['id']}/delete", token),
    ]
    assert [r.status_code for r in refused] == [403, 403, 403]
    assert "mallory" not in {u["username"] for u in api.get("/api/v1/users").json()}
    login_admin(api)
    keys = text(api.client.get(f"/admin/users/{bob['id']}", headers=HTML).text)
    assert "extra" not in keys


def test_admin_forms_need_the_csrf_token_and_the_same_origin(api: API):
    login_admin(api)
    token = csrf(api)
    assert post(api, "/admin/users", "forged", username="eve").status_code == 403
    cross = api.client.post(
        "/admin/users",
        data={"csrf_token": token, "username": "eve"},
        headers={**HTML, "Origin": "http://evil.example"},
        follow_redirects=False,
    )
    assert cross.status_code == 403
    assert "eve" not in {u["username"] for u in api.get("/api/v1/users").json()}


def test_bad_input_is_shown_next_to_its_field_and_creates_nothing(api: API):
    login_admin(api)
    token = csrf(api)
    before = len(api.get("/api/v1/users").json())
    cases = [
        ({"username": ""}, "username", "a name is required"),
        ({"username": "-bad name"}, "username", "letters, digits"),
        ({"username": "x" * 300}, "username", "at most 255 characters"),
        ({"username": "admin"}, "username", "already exists"),
        ({"username": "dave", "os_user": "Not POSIX"}, "os_user", "a POSIX user name"),
        ({"username": "dave", "project": "no-such-id"}, "project", "no such project"),
        ({"username": "dave", "role": "owner"}, "role", "one of researcher"),
    ]
    for data, name, message in cases:
        answer = post(api, "/admin/users", token, **data)
        assert answer.status_code == 400, (data, answer.status_code)
        assert re.search(rf'id="{name}-error">[^<]*{re.escape(message)}', answer.text), (
            data,
            text(answer.text)[:400],
        )
        assert f'aria-describedby="{name}-error"' in answer.text
    # What was typed stays in the form.
    kept = post(api, "/admin/users", token, username="dave", os_user="Not POSIX")
    assert 'value="dave"' in kept.text and 'value="Not POSIX"' in kept.text
    assert len(api.get("/api/v1/users").json()) == before


def test_a_new_users_secret_is_shown_once_and_its_key_logs_in(
    api: API, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    login_admin(api)
    token = csrf(api)
    created = post(
        api, "/admin/users", token, username="erin", project=api.project_id(), role="viewer"
    )
    assert created.status_code == 201
    client_id = re.search(r"<code>(rl-[0-9a-f]+)</code>", created.text).group(1)  # type: ignore[union-attr]
    secret = re.search(r'id="client-secret">([^<]+)<', created.text).group(1)  # type: ignore[union-attr]
    assert "shown only this once" in created.text and "no-store" in created.headers["cache-control"]
    # A Copy button for the secret (shown by app.js; the text stays selectable without it).
    assert re.search(r'<button type="button" class="copy" data-copy="client-secret"', created.text)
    erin = next(u for u in api.get("/api/v1/users").json() if u["username"] == "erin")
    assert [(m["projectName"], m["role"]) for m in erin["projects"]] == [("default", "viewer")]
    for path in ("/admin/users", f"/admin/users/{erin['id']}"):
        later = api.client.get(path, headers=HTML)
        assert later.status_code == 200 and secret not in later.text
        assert "erin" in later.text
    assert client_id in api.client.get(f"/admin/users/{erin['id']}", headers=HTML).text
    # "OS user" says which account erin's workloads run as, not a bare "none (mapped)".
    shown = text(api.client.get(f"/admin/users/{erin['id']}", headers=HTML).text)
    assert "workload" in shown and " run" in shown and "(mapped)" not in shown, shown[:600]

    # A second key: its secret once too; then revoked (it no longer logs in).
    made = post(api, f"/admin/users/{erin['id']}/keys", token, name="laptop")
    assert made.status_code == 201
    second = re.search(r'id="client-secret">([^<]+)<', made.text).group(1)  # type: ignore[union-attr]
    second_id = re.search(r"<code>(rl-[0-9a-f]+)</code>", made.text).group(1)  # type: ignore[union-attr]
    detail = api.client.get(f"/admin/users/{erin['id']}", headers=HTML).text
    assert second not in detail and "laptop" in detail and second_id in detail
    duplicate = post(api, f"/admin/users/{erin['id']}/keys", token, name="laptop")
    assert duplicate.status_code == 400 and "already has an access key named" in duplicate.text
    bad = post(api, f"/admin/users/{erin['id']}/keys", token, name="Bad Name!")
    assert bad.status_code == 400 and 'id="name-error"' in bad.text
    empty = post(api, f"/admin/users/{erin['id']}/keys", token, name="")
    assert empty.status_code == 400
    assert re.search(r'id="name-error">a name is required<', empty.text), text(empty.text)[:600]
    with api.client.app.state.sessions() as s:
        key_id = s.scalar(select(AccessKey.id).where(AccessKey.client_id == second_id))
    revoked = post(api, f"/admin/users/{erin['id']}/keys/{key_id}/revoke", token)
    assert revoked.status_code == 303
    after = api.client.get(f"/admin/users/{erin['id']}", headers=HTML).text
    assert "Access key laptop of erin revoked" in after and second_id not in after
    gone = api.client.post(
        "/api/v1/token",
        json={"grantType": "client_credentials", "clientID": second_id, "clientSecret": second},
    )
    assert gone.status_code == 401

    # The first key logs erin in: she sees her project, and no admin pages.
    assert secret not in caplog.text and second not in caplog.text
    login(api, client_id, secret)
    assert shown_projects(api.client.get("/projects", headers=HTML).text) == ["default"]
    assert api.client.get("/admin/users", headers=HTML).status_code == 403


def test_deleting_users_keeps_the_apis_rules(api: API):
    login_admin(api)
    token = csrf(api)
    frank = new_user(api, "frank", "default")
    admin = next(u for u in api.get("/api/v1/users").json() if u["username"] == "admin")
    myself = post(api, f"/admin/users/{admin['id']}/delete", token)
    assert myself.status_code == 409 and "you cannot delete yourself" in myself.text
    done = post(api, f"/admin/users/{frank['id']}/delete", token)
    assert done.status_code == 303 and done.headers["location"] == "/admin/users"
    listing = api.client.get("/admin/users", headers=HTML).text
    assert "User frank deleted" in listing and "/admin/users/" + frank["id"] not in listing
    assert post(api, "/admin/users/nobody/delete", token).status_code == 404


def test_an_admin_adds_and_removes_a_member(api: API):
    login_admin(api)
    token = csrf(api)
    grace = new_user(api, "grace")
    page = api.client.get(f"/admin/users/{grace['id']}", headers=HTML).text
    assert "Not a member of any project" in page
    pid = api.project_id()
    empty = post(api, f"/admin/users/{grace['id']}/projects", token, project="", role="viewer")
    assert empty.status_code == 400 and "choose a project" in empty.text
    added = post(api, f"/admin/users/{grace['id']}/projects", token, project=pid, role="admin")
    assert added.status_code == 303
    roles = api.get(f"/api/v1/users/{grace['id']}").json()["projects"]
    assert [(m["projectName"], m["role"]) for m in roles] == [("default", "admin")]
    removed = post(api, f"/admin/users/{grace['id']}/projects/{pid}/remove", token)
    assert removed.status_code == 303
    assert api.get(f"/api/v1/users/{grace['id']}").json()["projects"] == []

"""The projects, nodes and admin pages in a real browser (Debian's Chromium through
Playwright), on a server with simulated GPU nodes: an admin creates a user and an
access key through the pages, logs out, and the new user logs in and sees only
their project. Screenshots of every page, wide and narrow."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import wait_until
from tests.fixtures.browser import UI, VIEWPORT
from tests.server.conftest import ServerProcess, running_server

NARROW = {"width": 420, "height": 900}


@pytest.fixture
def gpu_ui(chromium: Any, tmp_path: Path) -> Iterator[UI]:
    """A browser page on a server with two simulated nodes of 4 GPUs each."""
    with running_server(tmp_path / "home", "--simulate-nodes", "2x4gpu") as server:
        context = chromium.new_context(
            viewport=VIEWPORT, locale="en-US", timezone_id="Europe/Paris"
        )
        context.set_default_timeout(30_000)
        try:
            yield UI(context.new_page(), server)
        finally:
            context.close()


def _api(server: ServerProcess, key: tuple[str, str]) -> httpx.Client:
    token = httpx.post(
        f"{server.url}/api/v1/token",
        json={"grantType": "client_credentials", "clientID": key[0], "clientSecret": key[1]},
    ).json()["accessToken"]
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"})


def _setup(ui: UI) -> str:
    """Two projects with quotas and a running half-GPU workload in team-a; its name."""
    with _api(ui.server, ui.admin_key) as api:
        team_a = {
            "name": "team-a",
            "resources": [
                {"gpu": {"deserved": 2, "limit": 6, "overQuotaWeight": 2}, "cpu": {"deserved": 8}}
            ],
        }
        assert api.post("/api/v1/org-unit/projects", json=team_a).status_code == 201
        long_name = {"username": "x" * 255}  # the longest the API takes
        assert api.post("/api/v1/users", json=long_name).status_code == 201
        team_b = {"name": "team-b", "resources": [{"gpu": {"deserved": 1}}]}
        assert api.post("/api/v1/org-unit/projects", json=team_b).status_code == 201
        project = api.get("/api/v1/org-unit/projects/team-a").json()["id"]
        compute = {"gpuDevicesRequest": 1, "gpuRequestType": "portion", "gpuPortionRequest": 0.5}
        body = {
            "name": "half-gpu",
            "projectId": project,
            "spec": {"command": "sleep 300", "numWorkers": 2, "compute": compute},
        }
        answer = api.post("/api/v1/workloads/distributed", json=body)
        assert answer.status_code == 202, answer.text
        wid = answer.json()["workloadId"]
        wait_until(
            lambda: api.get(f"/api/v1/workloads/{wid}").json()["actualPhase"] == "Running",
            120,
            "half-gpu Running",
        )
    return "half-gpu"


def _shots(ui: UI, name: str) -> None:
    """The page as it is, at 1280x800 and at a narrow 420 px window."""
    ui.shot(name)
    ui.page.set_viewport_size(NARROW)
    ui.shot(f"{name}-narrow")
    ui.page.set_viewport_size(VIEWPORT)


def test_an_admin_makes_a_user_who_logs_in_and_sees_only_their_project(gpu_ui: UI):
    ui = gpu_ui
    workload = _setup(ui)
    ui.login(path="/nodes")
    page = ui.page
    main = page.inner_text("main")
    assert re.search(r"0\.5 by half-gpu in project team-a", main), main
    assert "simulated" in main and "Ready" in main
    _shots(ui, "nodes-admin")

    ui.goto("/projects")
    assert page.get_by_role("heading", name="team-a").is_visible()
    bar = page.get_by_role("img", name=re.compile(r"GPUs in pool default: .* allocated"))
    assert bar.first.is_visible()
    _shots(ui, "projects-admin")

    # Create a user in team-b through the page; the secret shows once.
    page.get_by_role("link", name="Users").click()
    page.get_by_label("User name").fill("dana")
    page.get_by_label("Project (optional)").select_option(label="team-b")
    page.get_by_label("Role in the project").select_option("researcher")
    _shots(ui, "admin-users")
    page.get_by_role("button", name="Create user").click()
    assert "shown only this once" in page.inner_text("main")
    assert page.get_by_role("button", name="Copy").is_visible()
    _shots(ui, "admin-user-created")
    page.get_by_role("link", name="Back to dana").click()
    # A second key for dana, made on her page.
    page.get_by_label("New access key name").fill("laptop")
    page.get_by_role("button", name="Create access key").click()
    client_id = page.locator("dl.facts code").first.inner_text()
    secret = page.locator("#client-secret").inner_text()
    assert client_id.startswith("rl-") and len(secret) > 20
    _shots(ui, "admin-key-created")
    page.get_by_role("link", name="Back to dana").click()
    assert secret not in page.content() and client_id in page.content()
    _shots(ui, "admin-user")
    ui.goto("/admin/users")
    assert page.get_by_role("link", name="dana").is_visible() and secret not in page.content()
    # A 255-character name wraps in its cell: every column stays on screen.
    last = page.get_by_role("columnheader", name="Created").bounding_box()
    assert last is not None and last["x"] + last["width"] <= VIEWPORT["width"], last
    _shots(ui, "admin-users-list")
    page.get_by_role("link", name="dana").click()
    # An invalid key name: the message next to the field, nothing made.
    page.get_by_label("New access key name").fill("Bad Name")
    page.get_by_role("button", name="Create access key").click()
    assert page.locator("#name-error").is_visible()
    ui.shot("admin-user-invalid-key")
    assert [e for e in ui.console_errors if "400 (Bad Request)" not in e] == []
    ui.console_errors.clear()  # the refused form's 400, logged by the browser
    # Revoke dana's first key (the page asks first).
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke default").click()
    assert "Access key default of dana revoked" in page.inner_text("main")

    page.get_by_role("button", name="Log out").click()
    page.wait_for_url("**/login")
    ui.login(key=(client_id, secret), path="/projects")
    assert page.get_by_text("dana", exact=True).is_visible()
    headings = page.locator("section.project h2").all_inner_texts()
    assert [h.split()[0] for h in headings] == ["team-b"]
    assert "team-a" not in page.inner_text("main")
    assert page.get_by_role("link", name="Users").count() == 0
    _shots(ui, "projects-researcher")
    ui.goto("/nodes")
    main = page.inner_text("main")
    assert workload not in main and "by workloads of other projects" in main
    _shots(ui, "nodes-researcher")
    assert not ui.console_errors
    answer = ui.goto("/admin/users")
    assert answer.status == 403 and "only an admin" in page.inner_text("main")
    ui.shot("admin-refused")

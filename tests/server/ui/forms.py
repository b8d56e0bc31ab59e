"""Logging a TestClient in through the UI's login form, as a browser does (the
in-process tests of every page use it)."""

from __future__ import annotations

import re
from typing import Any

import httpx

from ringleader.server.ui.session import csrf_token_for
from tests.server.conftest import API

HTML = {"Accept": "text/html"}  # a browser's page navigation
FETCH = {"X-Requested-With": "fetch"}  # the pages' own script


def login_response(
    api: API, client_id: str | None = None, secret: str | None = None, next: str = "/workloads"
) -> httpx.Response:
    """The login form's answer (not followed), with a fresh cookie jar before it."""
    client = api.client
    client.cookies.clear()
    form = client.get("/login", headers=HTML)
    nonce = re.search(r'name="login_nonce" value="([^"]+)"', form.text)
    assert nonce, form.text
    return client.post(
        "/login",
        data={
            "client_id": client_id or api.creds["clientId"],
            "client_secret": secret or api.creds["clientSecret"],
            "login_nonce": nonce.group(1),
            "next": next,
        },
        headers=HTML,
        follow_redirects=False,
    )


def login(api: API, client_id: str | None = None, secret: str | None = None) -> str:
    """Log in (the admin by default); the session's CSRF token."""
    answer = login_response(api, client_id, secret)
    assert answer.status_code == 303, answer.text
    return csrf_token_for(api.client.cookies["rl_session"])


def wizard_form(api: API, **fields: str) -> dict[str, str]:
    """A filled wizard: seed 002's choices in project default, a command that runs here."""
    return {
        "project": api.project_id(),
        "framework": "PyTorch",
        "topology": "master",
        "name": "dist",
        "command": "python -c 'print(1)'",
        "workers": "2",
        "backoff_limit": "6",
        "gpu_request_type": "portion",
        **fields,
    }


def env_asset(api: API, name: str = "pytorch-dt", project: str = "default", **spec: Any) -> str:
    body = {
        "meta": {"name": name, "scope": "project", "projectId": api.project_id(project)},
        "spec": {"image": "kubeflow/pytorch-dist-mnist:latest", **spec},
    }
    made = api.post("/api/v1/asset/environment", json=body)
    assert made.status_code == 202, made.text
    return made.json()["meta"]["id"]


def compute_asset(api: API, name: str = "small-fraction", project: str = "default") -> str:
    body = {
        "meta": {"name": name, "scope": "project", "projectId": api.project_id(project)},
        "spec": {
            "gpuDevicesRequest": 1,
            "gpuRequestType": "portion",
            "gpuPortionRequest": 0.1,
            "cpuCoreRequest": 0.1,
            "cpuMemoryRequest": "100M",
        },
    }
    made = api.post("/api/v1/asset/compute", json=body)
    assert made.status_code == 202, made.text
    return made.json()["meta"]["id"]

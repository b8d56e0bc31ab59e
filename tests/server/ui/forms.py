"""Logging a TestClient in through the UI's login form, as a browser does (the
in-process tests of every page use it)."""

from __future__ import annotations

import re

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

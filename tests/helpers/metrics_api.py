"""The admin's HTTP client on a real server (the metrics tests share it)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.server.conftest import ServerProcess


def _login(server: ServerProcess, client_id: str, secret: str) -> dict[str, str]:
    body = {"grantType": "client_credentials", "clientID": client_id, "clientSecret": secret}
    response = httpx.post(f"{server.url}/api/v1/token", json=body)
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['accessToken']}"}


def _admin(server: ServerProcess) -> httpx.Client:
    creds = json.loads((Path(server.home) / "credentials.json").read_text())
    headers = _login(server, creds["clientId"], creds["clientSecret"])
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)

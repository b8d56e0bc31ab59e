"""Behind a TLS-terminating proxy on the same machine (uvicorn trusts
X-Forwarded-Proto from 127.0.0.1), the session cookie is Secure."""

from __future__ import annotations

import json
import re

import httpx

from tests.server.conftest import ServerProcess


def _login(server: ServerProcess, headers: dict[str, str]) -> httpx.Response:
    key = json.loads((server.home / "credentials.json").read_text())
    with httpx.Client(base_url=server.url, headers={"Accept": "text/html", **headers}) as client:
        form = client.get("/login")
        nonce = re.search(r'name="login_nonce" value="([^"]+)"', form.text)
        assert nonce, form.text
        # httpx (plain http to the server) keeps a Secure cookie to itself; the
        # browser behind the proxy (https) would send it: send it by hand.
        client.cookies.clear()
        return client.post(
            "/login",
            data={
                "client_id": key["clientId"],
                "client_secret": key["clientSecret"],
                "login_nonce": nonce.group(1),
                "next": "/",
            },
            headers={"Cookie": f"rl_login={nonce.group(1)}"},
        )


def test_the_cookie_is_secure_behind_a_tls_proxy_and_not_on_plain_http(ui_server: ServerProcess):
    plain = _login(ui_server, {})
    assert plain.status_code == 303, plain.text
    assert "Secure" not in plain.headers["set-cookie"]
    proxied = _login(
        ui_server,
        {"X-Forwarded-Proto": "https", "Origin": ui_server.url.replace("http://", "https://")},
    )
    assert proxied.status_code == 303, proxied.text
    cookie = proxied.headers["set-cookie"]
    assert "rl_session=" in cookie and "Secure" in cookie and "HttpOnly" in cookie

"""Login, session cookie, CSRF and logout, in-process (fast) on both databases."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from ringleader.server.db import utcnow
from ringleader.server.models import Token
from ringleader.server.ui.session import csrf_token_for, safe_next
from tests.server.conftest import API
from tests.server.ui.forms import HTML, login_response


def test_a_page_without_a_session_redirects_to_login_and_keeps_where_it_was_going(api: API):
    api.client.cookies.clear()
    answer = api.client.get("/workloads?project=a", headers=HTML, follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login?next=/workloads%3Fproject%3Da"
    # A script's fetch gets 401 and where to log in, not a page.
    fetched = api.client.get("/workloads", headers={"X-Requested-With": "fetch"})
    assert fetched.status_code == 401 and fetched.json()["login"].startswith("/login")


def test_login_sets_an_httponly_strict_cookie_and_goes_where_it_was_asked(api: API):
    answer = login_response(api, next="/workloads")
    assert answer.status_code == 303 and answer.headers["location"] == "/workloads"
    cookie = answer.headers["set-cookie"]
    assert "rl_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Secure" not in cookie  # plain http here; https gets Secure
    page = api.client.get("/workloads", headers=HTML)
    assert page.status_code == 200 and "Log out" in page.text
    assert "Content-Security-Policy" in page.headers and page.headers["X-Frame-Options"] == "DENY"


def test_a_wrong_secret_is_refused_without_a_cookie_or_an_echoed_secret(api: API):
    answer = login_response(api, secret="wrong-secret-xyz")
    assert answer.status_code == 401
    assert "Wrong client ID or secret." in answer.text
    assert "wrong-secret-xyz" not in answer.text
    assert "rl_session" not in answer.headers.get("set-cookie", "")
    assert api.creds["clientId"] in answer.text  # the id is kept for another try


def test_a_login_post_without_its_form_nonce_is_refused(api: API):
    api.client.cookies.clear()
    answer = api.client.post(
        "/login",
        data={"client_id": api.creds["clientId"], "client_secret": api.creds["clientSecret"]},
        headers=HTML,
        follow_redirects=False,
    )
    assert answer.status_code == 403 and "rl_session" not in answer.headers.get("set-cookie", "")


def test_next_never_leaves_the_site():
    for hostile in ["//evil.example/x", "https://evil.example", "/\\evil", "evil", ""]:
        assert safe_next(hostile) == "/"
    assert safe_next("/workloads?x=1") == "/workloads?x=1"


def test_logout_needs_the_csrf_token_and_then_ends_the_session(api: API):
    login_response(api)
    token = api.client.cookies["rl_session"]
    refused = api.client.post("/logout", headers=HTML, follow_redirects=False)
    assert refused.status_code == 403
    cross_site = api.client.post(
        "/logout",
        data={"csrf_token": csrf_token_for(token)},
        headers={**HTML, "Origin": "http://evil.example"},
        follow_redirects=False,
    )
    assert cross_site.status_code == 403
    assert api.client.get("/workloads", headers=HTML, follow_redirects=False).status_code == 200
    done = api.client.post(
        "/logout", data={"csrf_token": csrf_token_for(token)}, headers=HTML, follow_redirects=False
    )
    assert done.status_code == 303 and done.headers["location"] == "/login"
    # The token is revoked, not only forgotten by this browser.
    api.client.cookies.set("rl_session", token)
    again = api.client.get("/workloads", headers=HTML, follow_redirects=False)
    assert again.status_code == 303 and again.headers["location"].startswith("/login")


def test_an_expired_session_says_so_on_the_login_page(api: API):
    login_response(api)
    with api.client.app.state.sessions() as s, s.begin():
        s.execute(update(Token).values(expires_at=utcnow() - timedelta(seconds=1)))
    answer = api.client.get("/workloads", headers=HTML, follow_redirects=False)
    assert answer.status_code == 303 and "expired=1" in answer.headers["location"]
    page = api.client.get(answer.headers["location"], headers=HTML)
    assert "Your session expired" in page.text


def test_the_api_ignores_the_session_cookie(api: API):
    login_response(api)
    answer = api.client.get("/api/v1/workloads")
    assert answer.status_code == 401


def test_docs_open_with_the_ui_session(api: API):
    login_response(api)
    assert api.client.get("/docs", headers=HTML).status_code == 200

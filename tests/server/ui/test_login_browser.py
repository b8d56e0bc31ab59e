"""Login and CSRF in a real browser (Debian's Chromium through Playwright)."""

from __future__ import annotations

from tests.fixtures.browser import UI


def test_login_in_chromium_sets_a_strict_httponly_cookie(ui: UI):
    ui.goto("/workloads")
    assert "/login?next=/workloads" in ui.page.url
    ui.shot("login")
    ui.page.get_by_label("Client ID").fill(ui.admin_key[0])
    ui.page.get_by_label("Client secret").fill("not-the-secret")
    ui.page.get_by_role("button", name="Log in").click()
    assert ui.page.get_by_role("alert").inner_text() == "Wrong client ID or secret."
    ui.shot("login-wrong-secret")
    ui.console_errors.clear()  # the refused login's 401 is logged by the browser
    ui.login(path="/workloads")
    assert ui.page.url.endswith("/workloads")
    (cookie,) = [c for c in ui.page.context.cookies() if c["name"] == "rl_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert ui.page.evaluate("document.cookie") == ""  # no script can read it
    assert not ui.console_errors


def test_keyboard_only_login(ui: UI):
    ui.goto("/login")
    # The client id field has the focus on arrival: type, Tab, type, Enter.
    assert ui.page.evaluate("document.activeElement.id") == "client_id"
    ui.page.keyboard.type(ui.admin_key[0])
    ui.page.keyboard.press("Tab")
    ui.page.keyboard.type(ui.admin_key[1])
    ui.page.keyboard.press("Enter")
    ui.page.wait_for_url("**/workloads")
    ui.page.get_by_role("button", name="Log out").focus()
    ui.page.keyboard.press("Enter")
    ui.page.wait_for_url("**/login")
    assert "You are logged out." in ui.page.inner_text("main")


def test_a_forged_cross_site_post_is_refused(ui: UI):
    ui.login()
    evil = "http://evil.example/"
    forged = (
        f'<form id="f" method="post" action="{ui.url}/logout">'
        '<input name="csrf_token" value="guess"></form>'
        "<script>document.getElementById('f').submit()</script>"
    )
    ui.page.route(evil, lambda route: route.fulfill(content_type="text/html", body=forged))
    ui.page.goto(evil)
    ui.page.wait_for_url(f"{ui.url}/**")
    # SameSite=Strict: the forged POST carried no session, so it did nothing.
    ui.goto("/workloads")
    assert ui.page.url.endswith("/workloads")
    assert ui.page.get_by_role("button", name="Log out").is_visible()

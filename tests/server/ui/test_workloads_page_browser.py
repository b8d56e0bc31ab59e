"""The workloads page in Debian's Chromium against a real server: a workload
appears and its status changes live without a reload; Stop, Run and Delete
from the table; a researcher neither sees nor acts on another project's
workloads. Screenshots: empty, populated, narrow."""

from __future__ import annotations

import json
import re
import sys

from tests.conftest import wait_until
from tests.fixtures.browser import UI

SLEEPER = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]


def _row(ui: UI, name: str):
    return ui.page.locator("#wl-rows tr", has=ui.page.get_by_role("link", name=name, exact=True))


def _status(ui: UI, name: str) -> str:
    return _row(ui, name).locator("td[data-label=Status] .status").inner_text()


def _why(ui: UI, name: str):
    """The reason's line under ``name``'s row (why it waits or failed)."""
    wid = _row(ui, name).get_attribute("data-id")
    return ui.page.locator(f'#wl-rows tr.wl-why[data-for="{wid}"] .reason')


# A row's layout as the browser draws it: its height, the line height of its text, how
# many lines each date cell's <time> takes, and the dates' text and title.
ROW_LAYOUT = """tr => {
  const line = parseFloat(getComputedStyle(tr.querySelector("td")).lineHeight);
  const times = [...tr.querySelectorAll("td.wl-time time")];
  const why = tr.nextElementSibling && tr.nextElementSibling.classList.contains("wl-why")
    ? tr.nextElementSibling : null;
  return {
    height: tr.getBoundingClientRect().height, line,
    dateLines: times.map((t) => t.getClientRects().length),
    dateHeights: times.map((t) => t.getBoundingClientRect().height),
    dates: times.map((t) => t.textContent), titles: times.map((t) => t.title),
    whyHeight: why ? why.getBoundingClientRect().height : 0,
  };
}"""


def _rows_are_short(ui: UI, names: list[str]) -> None:
    """At 1280 px no row is over two lines of text (buttons and padding included), a
    date is one line ("Nov 29 09:31", the whole time in its title) and a reason's line
    is one line, cut to fit."""
    assert ui.page.viewport_size == {"width": 1280, "height": 800}
    assert ui.page.eval_on_selector(".table-wrap", "e => e.scrollWidth <= e.clientWidth")
    for name in names:
        row = _row(ui, name)
        layout = row.evaluate(ROW_LAYOUT)
        line = layout["line"]
        assert layout["height"] < 2.5 * line, (name, layout)
        assert layout["dateLines"] == [1] and layout["dateHeights"][0] < 1.5 * line, layout
        assert re.fullmatch(r"[A-Z][a-z]{2} \d{1,2} \d{2}:\d{2}", layout["dates"][0]), layout
        assert "GMT+1" in layout["titles"][0] and "UTC" in layout["titles"][0], layout
        if layout["whyHeight"]:
            assert layout["whyHeight"] < 1.8 * line, (name, layout)


def _submit(ui: UI, name: str, *extra: str, creds: tuple[str, str] | None = None) -> None:
    done = ui.server.cli(
        "submit-dist", "pytorch", name, "--workers", "1", *extra, "--", *SLEEPER, creds=creds
    )
    assert done.returncode == 0, done.stderr


def test_a_workload_appears_updates_live_and_is_stopped_resumed_and_deleted(ui: UI):
    ui.login(path="/workloads")
    assert ui.page.get_by_text("No workloads yet — ").is_visible()
    ui.shot("workloads-empty")
    ui.page.evaluate("window.notReloaded = true")  # a reload would lose it

    _submit(ui, "live-run")
    _submit(ui, "too-big", "-g", "64")  # no node has 64 GPUs: Pending, and says why
    wait_until(lambda: _row(ui, "live-run").count() == 1, 60, "the new row to appear")
    wait_until(lambda: _status(ui, "live-run") == "Running", 90, "Running, live")
    assert ui.page.evaluate("window.notReloaded") is True
    range_text = lambda: ui.page.locator("#wl-range").inner_text()  # noqa: E731
    wait_until(lambda: range_text() == "1–2 of 2", 60, "both rows, live")
    pending = _row(ui, "too-big")
    assert pending.locator(".status").inner_text() == "Pending"
    why = _why(ui, "too-big")  # the reason in words, on a line of its own under the row
    assert why.inner_text().startswith("Why it waits: ") and "64" in why.inner_text()
    assert why.get_attribute("title") in why.inner_text()  # the whole text on hover
    assert _why(ui, "live-run").count() == 0
    _rows_are_short(ui, ["live-run", "too-big"])
    ui.shot("workloads-rows")
    assert not ui.page.get_by_text("No workloads yet").is_visible()

    # Connect: the CLI command for its master pod.
    ui.page.get_by_label("Connect to live-run").click()
    command = _row(ui, "live-run").locator("code.wl-command").inner_text()
    assert command == "ringleader bash live-run --project default"
    ui.shot("workloads-populated")

    # Copy & edit opens the wizard filled from it, under a free name.
    ui.page.get_by_role("link", name="Copy and edit live-run").click()
    ui.page.wait_for_url("**/workloads/new?copy=*")
    assert ui.page.locator('input[value="live-run-copy"]').count() == 1
    ui.goto("/workloads")

    ui.page.once("dialog", lambda dialog: dialog.accept())  # Stop asks first, as Delete does
    ui.page.get_by_role("button", name="Stop live-run").click()
    ui.page.wait_for_load_state()
    assert "Stopping live-run." in ui.page.get_by_role("status").first.inner_text()
    wait_until(lambda: _status(ui, "live-run") == "Stopped", 60, "Stopped, live")
    ui.page.get_by_role("button", name="Run live-run").click()
    ui.page.wait_for_load_state()
    wait_until(lambda: _status(ui, "live-run") == "Running", 90, "Running again")

    ui.page.once("dialog", lambda dialog: dialog.accept())
    ui.page.get_by_role("button", name="Delete live-run").click()
    ui.page.wait_for_load_state()
    assert "Deleting live-run." in ui.page.get_by_role("status").first.inner_text()
    wait_until(lambda: _row(ui, "live-run").count() == 0, 60, "the row to go, live")

    ui.page.set_viewport_size({"width": 420, "height": 800})
    ui.goto("/workloads")
    ui.shot("workloads-narrow")
    assert not ui.console_errors


def test_a_researcher_does_not_see_or_act_on_another_projects_workloads(ui: UI):
    cli = ui.server.cli
    made = cli("user", "create", "rita")
    assert made.returncode == 0, made.stderr
    rita = (
        re.search(r"Client ID:\s+(\S+)", made.stdout).group(1),
        re.search(r"Client secret:\s+(\S+)", made.stdout).group(1),
    )
    assert cli("project", "create", "vision").returncode == 0
    assert cli("user", "assign", "rita", "vision", "--role", "researcher").returncode == 0
    _submit(ui, "admins-run")
    _submit(ui, "ritas-run", "--project", "vision", creds=rita)

    ui.login(rita, path="/workloads")
    wait_until(lambda: _row(ui, "ritas-run").count() == 1, 30, "her own workload")
    assert _row(ui, "admins-run").count() == 0
    assert ui.page.locator("#wl-project option").all_inner_texts() == ["All projects", "vision"]
    ui.shot("workloads-researcher")
    ui.goto("/workloads?size=7")  # a hand-edited URL: the page says what is wrong
    assert "size: choose one of 10, 25, 50, 100, 200" in ui.page.get_by_role("alert").inner_text()
    ui.shot("workloads-bad-query")

    admins = lambda: json.loads(cli("describe", "admins-run", "-o", "json").stdout)  # noqa: E731
    admins_id = admins()["workloadId"]
    token = ui.page.locator('meta[name="csrf-token"]').get_attribute("content")
    for action in ("suspend", "delete"):
        answer = ui.page.request.post(
            f"{ui.url}/workloads/{admins_id}/{action}",
            form={"csrf_token": token, "confirmed": "yes"},
            headers={"Origin": ui.url},
        )
        assert answer.status == 404, (action, answer.text())
    assert admins()["desiredPhase"] == "Running"  # nothing was recorded

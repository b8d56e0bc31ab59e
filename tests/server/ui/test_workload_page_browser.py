"""The workload page in Debian's Chromium: a real distributed run watched live, a
failure's root cause, a pending workload's reason; screenshots of each state."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

from tests.fixtures.browser import ARTIFACTS, UI
from tests.helpers.workload_page import _api, _jagged_run, _submit

STATUS = "#piece-status .workload-status .status"
NARROW = {"width": 420, "height": 860}


def _status(ui: UI) -> str:
    return ui.page.inner_text(STATUS)


# A drawn chart's layout, as the browser lays it out: the smallest text on screen (px),
# how many tick labels the axis titles overlap, labels outside the drawing, the gap
# between a legend's marker and its text, and the lowest y tick.
CHART_LAYOUT = """fig => {
  const svg = fig.querySelector("svg"), frame = svg.getBoundingClientRect();
  const scale = frame.width / svg.viewBox.baseVal.width;
  const box = (t) => t.getBoundingClientRect();
  const meets = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const texts = [...svg.querySelectorAll("text")];
  const yTitle = box(svg.querySelector(".axis-y")), xTitle = box(svg.querySelector(".axis-x"));
  const gaps = [...fig.querySelectorAll(".chart-legend li")].map((li) =>
    box(li.querySelector("span")).left - box(li.querySelector("svg")).right);
  return {
    smallest: Math.min(...texts.map((t) => parseFloat(getComputedStyle(t).fontSize) * scale)),
    overlaps: [...svg.querySelectorAll(".tick-y")].filter((t) => meets(box(t), yTitle)).length
      + [...svg.querySelectorAll(".tick-x")].filter((t) => meets(box(t), xTitle)).length,
    outside: texts.filter((t) => { const b = box(t); return b.left < frame.left - 1
      || b.right > frame.right + 1 || b.top < frame.top - 1 || b.bottom > frame.bottom + 1; }).length,
    legendGap: Math.min(...gaps),
    lowestY: svg.querySelector(".tick-y").textContent,
  };
}"""
REDRAWN = """() => [...document.querySelectorAll("figure.chart")].every((f) => !f.dataset.drawnWidth
  || +f.dataset.drawnWidth === Math.max(280, Math.floor(f.getBoundingClientRect().width) - 2))"""


SPAN = "svg => [+svg.dataset.x0, +svg.dataset.x1]"  # the x axis' range, as drawn


def _charts_readable(ui: UI, names: list[str]) -> dict[str, dict]:
    """Every drawn chart's text is at least 11 px on screen, no axis title is drawn
    over a tick label, nothing is cut off, and a legend's marker stands off its text."""
    ui.page.wait_for_function(REDRAWN)
    found = {}
    for name in names:
        layout = ui.page.eval_on_selector(f"#chart-{name}", CHART_LAYOUT)
        assert layout["smallest"] >= 11 and layout["overlaps"] == 0, (name, layout)
        assert layout["outside"] == 0 and layout["legendGap"] >= 4, (name, layout)
        found[name] = layout
    return found


def _tables_fit(ui: UI) -> None:
    """Pods and events fit the window: nothing scrolls sideways, captions show."""
    for piece in ("pods", "events"):
        wrap = f"#piece-{piece} .table-wrap"
        assert ui.page.eval_on_selector(wrap, "e => e.scrollWidth <= e.clientWidth"), piece
        caption = ui.page.eval_on_selector(
            f"{wrap} td[data-label]", "td => getComputedStyle(td, '::before').content"
        )
        assert caption not in ("none", "normal", ""), (piece, caption)


# Only rank 0 of the example prints; each pod says it starts, so every pod has logs.
# Every rank then waits for the test's word, so the run is still going while the test
# pauses and resumes the log (on a loaded machine two epochs can end before that).
TRAIN_THEN_WAIT = """import os, runpy, sys, time
print("rank", os.environ["RANK"], "starts", flush=True)
sys.argv = ["digits", "--epochs", "2", "--no-checkpoint"]
try:
    runpy.run_module("ringleader.examples.digits", run_name="__main__")
except SystemExit as ended:
    assert not ended.code, ended.code
while not os.path.exists(sys.argv[0] + ".release"):
    time.sleep(0.1)
"""


def test_a_distributed_run_is_watched_live_to_completion(ui: UI, tmp_path: Path):
    api = _api(ui)
    script = tmp_path / "train_then_wait.py"
    script.write_text(TRAIN_THEN_WAIT.replace("sys.argv[0]", repr(str(script))))
    wid = _submit(api, "digits", f"python {script}", workers=2)
    ui.login(path=f"/workloads/{wid}")
    page = ui.page
    page.evaluate("window.stillTheSamePage = true")
    expect(page.locator(STATUS)).to_have_text("Running", timeout=120_000)
    page.wait_for_selector("#chart-loss path.series", timeout=120_000)
    page.wait_for_selector("#log .line", timeout=60_000)
    ui.shot("workload-running")
    follow = page.get_by_role("button", name="Pause")  # by keyboard: focus, Enter
    follow.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#log-follow")).to_have_attribute("aria-pressed", "false")
    expect(page.locator("#log-state")).to_contain_text("paused")
    page.keyboard.press("Enter")
    expect(page.locator("#log-follow")).to_have_attribute("aria-pressed", "true")
    expect(page.locator(STATUS)).to_have_text("Running")  # the test's word ends it
    Path(f"{script}.release").touch()
    expect(page.locator(STATUS)).to_have_text("Completed", timeout=300_000)
    assert page.evaluate("window.stillTheSamePage") is True  # no reload: live updates
    pods = ["digits-master-0", "digits-worker-0", "digits-worker-1"]
    for pod in pods:  # logs from every pod, merged
        page.wait_for_selector(f'#log .line[data-pod="{pod}"]')
    # The loss chart has a series per rank, with points, and its numbers in words.
    drawn = page.eval_on_selector_all(
        "#chart-loss path.series", "els => els.map(e => +e.dataset.points)"
    )
    assert len(drawn) == 3 and all(n > 0 for n in drawn), drawn
    assert "Latest:" in page.inner_text("#chart-loss .chart-last")
    assert "total" in page.inner_text("#chart-rate .chart-legend")
    # CPU and memory per pod, sampled by the agent while the pods ran.
    for chart in ("cpu", "memory"):
        expect(page.locator(f"#chart-{chart} path.series")).to_have_count(3)
    # Pods table: every pod Succeeded (the pod phase word), exit code 0.
    rows = page.inner_text("#piece-pods tbody")
    assert rows.count("Succeeded") == 3, rows
    charts = ["loss", "rate", "step", "cpu", "memory"]
    _charts_readable(ui, charts)
    # The time charts share the run's span; the rate is drawn smoothed.
    spans = {n: page.eval_on_selector(f"#chart-{n} svg", SPAN) for n in ("rate", "cpu", "memory")}
    assert spans["rate"] == spans["cpu"] == spans["memory"] and spans["rate"][0] == 0, spans
    assert page.locator("#chart-rate path.series[data-window]").count() == 4  # 3 ranks, total
    for name in ("rate", "step", "cpu", "memory"):  # never negative: from 0
        layout = page.eval_on_selector(f"#chart-{name}", CHART_LAYOUT)
        assert layout["lowestY"] in ("0", "0 s", "0 MiB", "0 GiB"), (name, layout)
    assert " s after start." in page.inner_text("#chart-cpu .chart-last")
    # Ended: nothing to follow; times name their zone (the browser's: Europe/Paris).
    expect(page.locator("#log-follow")).to_be_hidden()
    expect(page.locator("#log-state")).to_contain_text("the workload ended")
    assert page.inner_text("#piece-facts time").endswith("GMT+1")
    page.get_by_label("Search").fill("epoch")
    page.get_by_label("Only matching lines").check()
    shown = page.eval_on_selector_all("#log .line:not(.hidden)", "els => els.length")
    assert shown > 0 and page.locator("#log mark").count() >= shown
    ui.shot("workload-completed")
    page.get_by_label("Only matching lines").uncheck()
    page.get_by_label("Search").fill("")
    page.get_by_label("Pod", exact=True).select_option("digits-worker-1")
    expect(page.locator('#log .line[data-pod="digits-worker-1"]').first).to_be_visible()
    expect(page.locator('#log .line:not([data-pod="digits-worker-1"])')).to_have_count(0)
    with page.expect_download() as download:
        page.get_by_role("button", name="Download").click()
    assert download.value.suggested_filename == "digits-worker-1.log"
    page.set_viewport_size(NARROW)
    _charts_readable(ui, charts)  # redrawn at the narrow width
    _tables_fit(ui)
    ui.shot("workload-completed-narrow")
    for part in ("spec", "pods", "charts", "logs", "events", "submit-again"):
        page.locator(f"#{part}").screenshot(path=str(ARTIFACTS / f"workload-narrow-{part}.png"))
    assert not ui.console_errors, ui.console_errors


def test_a_failure_shows_its_root_cause_and_a_waiting_workload_its_reason(ui: UI):
    api = _api(ui)
    # Rank 0 crashes; rank 1 (the worker) prints nothing.
    crash = "python -c \"import os, json; os.environ['RANK'] == '0' and json.loads('{not json')\""
    failed = _submit(api, "crash", crash, workers=1, backoffLimit=0)
    waiting = _submit(api, "too-big", "python -c pass", workers=1,
                      compute={"gpuDevicesRequest": 64})  # fmt: skip
    page = ui.page
    # CPU and memory per pod, as the metrics answer carries them (``resources``): drawn
    # per pod. Served here by the test, so the charts are checked whatever the run measured.
    used = {"workloadId": waiting, "collected": True, "series": [], "until": 1000.0,
            "resources": [{"pod": f"too-big-{role}", "node": "vm", "points": [
                {"time": 990.0 + t, "cpu": 0.0, "memoryBytes": (200 + 10 * t) << 20}
                for t in range(10)]} for k, role in enumerate(["master-0", "worker-0"])]}  # fmt: skip
    page.route(
        f"**/workloads/{waiting}/metrics*",
        lambda route: route.fulfill(
            json=used if "since" not in route.request.url else {**used, "resources": []}
        ),
    )
    ui.login(path=f"/workloads/{waiting}")
    explain = page.locator("#piece-status .explain-wait")
    explain.wait_for()
    assert "Why it waits:" in explain.inner_text()
    assert "Pending" in _status(ui)
    assert "No pods yet" in page.inner_text("#piece-pods")
    expect(page.locator("#chart-cpu path.series")).to_have_count(2)
    expect(page.locator("#chart-memory path.series")).to_have_count(2)
    # No CPU used at all (a sleep): the axis is 0 to 1 core, not -0.1 to 0.1.
    assert "too-big-worker-0: 0 at 9.0 s after start" in page.inner_text("#chart-cpu .chart-last")
    cores = page.eval_on_selector_all("#chart-cpu .tick-y", "els => els.map(e => e.textContent)")
    assert cores[0] == "0" and cores[-1] == "1", cores
    assert "MiB" in page.inner_text("#chart-memory .chart-last")
    assert "No points yet" in page.inner_text("#chart-loss")
    ui.shot("workload-pending")
    page.set_viewport_size(NARROW)
    ui.shot("workload-pending-narrow")
    _charts_readable(ui, ["cpu", "memory"])
    page.set_viewport_size({"width": 1280, "height": 800})

    ui.goto(f"/workloads/{failed}")
    expect(page.locator(STATUS)).to_have_text("Failed", timeout=120_000)
    alert = page.locator("#piece-status .explain-bad")
    cause = alert.locator("pre.root-cause")
    cause.wait_for()
    assert "Why it failed:" in alert.inner_text()
    assert "Traceback" in cause.inner_text() and "JSONDecodeError" in cause.inner_text()
    ui.shot("workload-failed")
    expect(page.locator("#log-follow")).to_be_hidden()  # ended: nothing to follow
    expect(page.locator("#log-state")).to_contain_text("the workload ended")
    page.get_by_label("Pod", exact=True).select_option("crash-worker-0")
    expect(page.locator("#log-state")).to_have_text("No output · the workload ended")
    expect(page.locator("#log")).to_be_hidden()  # no empty box
    copy = page.locator("#submit-again button.copy").first
    copy.click()
    expect(copy).to_have_text(re.compile("Copied|Selected"))
    page.evaluate("window.scrollTo(0, 0)")
    ui.shot("workload-failed-viewport", full_page=False)
    page.set_viewport_size(NARROW)
    _tables_fit(ui)
    ui.shot("workload-failed-narrow")
    assert not ui.console_errors, ui.console_errors


# Each series' smoothed line and its faint measured one: their heights on screen, and
# where the smoothed one starts, as a share of the plot's width.
SMOOTHED = """fig => {
  const svg = fig.querySelector("svg");
  const axis = [...svg.querySelectorAll("line.axis")].pop().getBBox();  // the x axis
  return [...svg.querySelectorAll("path.series")].map((line) => {
    const raw = svg.querySelector(`path.raw[data-series="${line.dataset.series}"]`);
    const box = line.getBBox();
    return { name: line.dataset.series, smooth: box.height, raw: raw.getBBox().height,
             from: (box.x - axis.x) / axis.width, to: (box.x + box.width - axis.x) / axis.width };
  });
}"""


def test_the_rate_chart_covers_the_whole_run_smoothed(ui: UI):
    api = _api(ui)
    wid = _submit(api, "too-big", "python -c pass", workers=1,
                  compute={"gpuDevicesRequest": 64})  # fmt: skip
    run = _jagged_run(wid)
    later = {**run, "series": [], "resources": []}  # nothing new since
    ui.page.route(f"**/workloads/{wid}/metrics*", lambda route: route.fulfill(
        json=later if "since" in route.request.url else run))  # fmt: skip
    ui.login(path=f"/workloads/{wid}")
    page = ui.page
    page.wait_for_selector("#chart-rate path.series")
    # The x axis is the run's metrics span, 0 to 48 s, on every time chart.
    for name in ("rate", "cpu", "memory"):
        assert page.eval_on_selector(f"#chart-{name} svg", SPAN) == [0, 48], name
    assert page.locator("#chart-rate .tick-x").last.text_content() == "40"
    lines = page.eval_on_selector("#chart-rate", SMOOTHED)
    assert [line["name"] for line in lines] == [
        "too-big-master-0 · rank 0", "too-big-worker-0 · rank 1", "total"]  # fmt: skip
    for line in lines:
        # Drawn where the rate was reported (the last 18 of 48 s) ...
        assert 0.6 < line["from"] < 0.65 and line["to"] > 0.99, line
        # ... as a moving average: a jagged 100-300 series becomes a line near its mean.
        assert line["smooth"] < 0.3 * line["raw"], line
    # Over 1/25 of the axis, or 12 reports (every 0.5 s here) when that is more.
    assert "Lines: averages over 6 s" in page.inner_text("#chart-rate .chart-last")
    _charts_readable(ui, ["rate", "cpu", "memory"])
    page.locator("#charts").screenshot(path=str(ARTIFACTS / "workload-rate-smoothed.png"))
    assert not ui.console_errors, ui.console_errors

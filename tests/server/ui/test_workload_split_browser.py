"""The workload page says where a step's time goes: compute and communication, from the
metrics' ``stepSplit`` (runtime.prepare's timers), in words and as a bar."""

from __future__ import annotations

from tests.fixtures.browser import ARTIFACTS, UI
from tests.helpers.workload_page import _api, _jagged_run, _submit

SPLIT = """box => ({
  hidden: box.hidden,
  compute: box.querySelector(".split-bar .split-compute").getBoundingClientRect().width,
  comm: box.querySelector(".split-bar .split-comm").getBoundingClientRect().width,
  network: box.classList.contains("network"),
})"""


def test_the_step_split_is_shown_in_words_and_as_a_bar(ui: UI) -> None:
    api = _api(ui)
    wid = _submit(api, "split", "python -c pass", workers=1,
                  compute={"gpuDevicesRequest": 64})  # fmt: skip
    split = {"stepTime": 0.12, "computeTime": 0.07, "commTime": 0.05, "bound": "network",
             "ranks": 2}  # fmt: skip
    run = {**_jagged_run(wid), "stepSplit": split}
    later = {**run, "series": [], "resources": []}
    ui.page.route(f"**/workloads/{wid}/metrics*", lambda route: route.fulfill(
        json=later if "since" in route.request.url else run))  # fmt: skip
    ui.login(path=f"/workloads/{wid}")
    page = ui.page
    page.wait_for_selector("#step-split:not([hidden])")
    text = page.inner_text("#step-split")
    assert "Step 120 ms: compute 70 ms, communication 50 ms (network-bound)" in text
    assert "2 ranks' latest steps" in text
    shown = page.eval_on_selector("#step-split", SPLIT)
    assert shown["network"] and not shown["hidden"]
    assert abs(shown["comm"] / (shown["compute"] + shown["comm"]) - 50 / 120) < 0.02, shown
    page.locator("#charts").screenshot(path=str(ARTIFACTS / "workload-step-split.png"))
    assert not ui.console_errors, ui.console_errors


def test_no_split_no_line(ui: UI) -> None:
    api = _api(ui)
    wid = _submit(api, "nosplit", "python -c pass", workers=1,
                  compute={"gpuDevicesRequest": 64})  # fmt: skip
    run = _jagged_run(wid)  # a program that never called runtime.prepare: no stepSplit
    ui.page.route(f"**/workloads/{wid}/metrics*", lambda route: route.fulfill(json=run))
    ui.login(path=f"/workloads/{wid}")
    ui.page.wait_for_selector("#chart-rate path.series")
    assert ui.page.eval_on_selector("#step-split", "box => box.hidden")

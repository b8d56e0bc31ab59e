"""The new-workload wizard in a real browser (Debian's Chromium), seed 002's path: a
distributed PyTorch workload with a saved environment and compute resource, an
invalid form that creates nothing, and the whole creation by keyboard alone.

The server simulates one node with 2 GPUs (``--simulate-nodes 1x2gpu``, as the CLI's
``gpu_server``), so the seed's GPU fraction is admitted on this GPU-less machine.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import UI
from tests.server.conftest import ServerProcess, running_server

NARROW = {"width": 420, "height": 800}


@pytest.fixture
def ui_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """Overrides the plain server: one simulated node with 2 GPUs."""
    with running_server(tmp_path / "home", "--simulate-nodes", "1x2gpu") as server:
        yield server


def _cli(ui: UI, *args: str) -> str:
    done = ui.server.cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _phase(ui: UI, name: str, phases: set[str], timeout: float = 120) -> str:
    """Wait until the workload ``name`` reaches one of ``phases`` (the CLI says which)."""
    deadline = time.monotonic() + timeout
    while True:
        shown = ui.server.cli("describe", name, "-p", "default").stdout
        found = re.search(r"Status:\s+(\w+)", shown) or re.search(r"Phase:\s+(\w+)", shown)
        if found and found.group(1) in phases:
            return found.group(1)
        assert time.monotonic() < deadline, shown
        time.sleep(0.5)


def _landed(ui: UI, name: str) -> None:
    """On the new workload's page, with the notice (shown there once the workload's page
    is built; until then the workloads page shows it)."""
    ui.page.wait_for_url(re.compile(r".*/workloads/(?!new$)[^/?]+$"))
    notice = f"Workload {name} created"
    if f"Workload {name} has ended: " in ui.page.inner_text("body"):
        return  # it ended before its page showed: the notice says so instead
    if notice not in ui.page.inner_text("body"):
        ui.console_errors[:] = [e for e in ui.console_errors if "404" not in e]  # not built
        ui.goto("/workloads")
        assert notice in ui.page.inner_text("main")


def _continue(ui: UI, step: str) -> None:
    """CONTINUE from ``step``: CREATE is not offered before the last step, the summary."""
    expect(ui.page.locator("#create")).to_be_hidden()
    ui.page.locator(f"#{step} button.continue").click()


def _summary(ui: UI) -> dict[str, str]:
    """The Summary step's rows once the server answered for the form as it is."""
    ui.page.wait_for_selector("#step-summary:not([hidden]) #recap:not([aria-busy]) dl")
    expect(ui.page.locator("#create")).to_be_visible()
    rows = ui.page.locator("#recap .recap-row")
    keys = rows.locator("dt").all_inner_texts()
    return dict(zip(keys, rows.locator("dd").all_inner_texts(), strict=True))


def _to_summary(ui: UI) -> dict[str, str]:
    ui.page.get_by_role("button", name="7. Summary").click()
    return _summary(ui)


def test_seed_002_a_distributed_pytorch_workload_through_the_wizard(ui: UI):
    # The seed's small-fraction compute resource, made beforehand (its gallery entry).
    _cli(ui, "compute", "create", "small-fraction", "-g", "0.1", "--cpu", "0.1",
         "--memory", "100M", "-p", "default")  # fmt: skip
    ui.login(path="/workloads/new")
    page = ui.page
    assert page.url.endswith("/workloads/new")
    # Step 1: the project (the admin's one project is chosen), Training, Distributed, PyTorch.
    assert page.get_by_label("Project").input_value() != ""
    assert page.get_by_label("PyTorch").is_checked()
    assert page.get_by_label("Workers & master").is_checked()
    ui.shot("wizard-1-project")
    _continue(ui, "step-project")
    # Step 2: a name, checked as it is typed.
    page.get_by_label("Workload name").fill("seed-dist")
    page.wait_for_selector("#name-status.name-free")
    ui.shot("wizard-2-name")
    _continue(ui, "step-name")
    # Step 3, as the seed says it: + NEW ENVIRONMENT, pytorch-dt as the name, the
    # seed's image as the Image URL, CREATE ENVIRONMENT.
    page.get_by_text("+ New environment").click()
    page.get_by_label("Environment name").fill("pytorch-dt")
    page.get_by_label("Image URL").fill("kubeflow/pytorch-dist-mnist:latest")
    ui.shot("wizard-3-new-environment")
    ui.page.set_viewport_size(NARROW)
    ui.shot("wizard-narrow-3-new-environment")
    ui.page.set_viewport_size({"width": 1280, "height": 800})
    page.get_by_role("button", name="Create environment").click()
    page.wait_for_selector("#saved")
    assert "Environment pytorch-dt created and selected." in page.inner_text("#saved")
    env_select = page.locator("#f-environment")
    chosen = env_select.locator("option:checked").inner_text()
    assert chosen == "pytorch-dt (kubeflow/pytorch-dist-mnist:latest)"
    assert page.get_by_label("Workload name").input_value() == "seed-dist"  # kept
    ui.shot("wizard-3-environment-selected")
    _continue(ui, "step-environment")
    # Step 4: 2 workers and small-fraction. Each GPU-request radio has its own name.
    assert page.get_by_label("Workers", exact=True).input_value() == "2"
    assert page.get_by_label("% of device", exact=True).count() == 1
    assert page.get_by_label("Master: % of device").count() == 1
    page.get_by_text("+ New compute resource").click()
    for label in ("Compute resource name", "GPU devices per pod", "CPU cores per pod"):
        assert page.get_by_label(label, exact=True).last.is_visible()
    ui.shot("wizard-4-new-compute")
    page.get_by_text("+ New compute resource").click()
    page.locator("#f-compute").select_option(label="small-fraction (1 GPU x 10%, 0.1 CPU, 100M)")
    ui.shot("wizard-4-compute")
    _continue(ui, "step-compute")
    ui.shot("wizard-5-general")
    _continue(ui, "step-general")
    ui.shot("wizard-6-master")
    page.get_by_label("Give the master a different setup").check()
    assert page.locator("#master-fields").is_visible()
    ui.shot("wizard-6-master-own-setup")
    page.get_by_label("Give the master a different setup").uncheck()
    _continue(ui, "step-master")
    # Step 7, the summary: the chosen assets by name, what they fill in, and words
    # (never a bare "-") where nothing is set; only here is CREATE offered.
    recap = _summary(ui)
    assert recap["Project"] == "default" and recap["Name"] == "seed-dist", recap
    assert recap["Environment"] == "pytorch-dt (kubeflow/pytorch-dist-mnist:latest)", recap
    assert recap["Image"] == "kubeflow/pytorch-dist-mnist:latest", recap
    assert recap["Compute resource"] == "small-fraction (1 GPU x 10%, 0.1 CPU, 100M)", recap
    assert "GPU portion 10% of a GPU" in recap["Compute per pod"], recap
    assert recap["Working directory"].startswith("not set: the workload's own work directory")
    assert recap["Type"] == "PyTorch distributed training: a master and 2 workers", recap
    assert "-" not in recap.values(), recap
    ui.shot("wizard-7-summary")
    page.get_by_role("button", name="Create training").click()
    _landed(ui, "seed-dist")
    ui.shot("wizard-created")
    # What was created is what `ringleader submit` with the same assets would make.
    shown = _cli(ui, "describe", "seed-dist", "-p", "default")
    assert "kubeflow/pytorch-dist-mnist:latest" in shown, shown
    assert _phase(ui, "seed-dist", {"Running", "Completed"}) in {"Running", "Completed"}
    assert not ui.console_errors, ui.console_errors


def test_an_invalid_form_shows_field_messages_and_creates_nothing(ui: UI):
    ui.login(path="/workloads/new")
    page = ui.page
    _continue(ui, "step-project")
    page.get_by_label("Workload name").fill("Bad_Name")
    page.wait_for_selector("#name-status.name-taken")  # said before sending
    assert "Not a valid name" in page.inner_text("#name-status")
    _continue(ui, "step-name")
    page.get_by_label("Image").first.fill("nginx:1;id")
    _to_summary(ui)
    page.get_by_role("button", name="Create training").click()
    page.wait_for_selector("#error-summary")
    summary = page.inner_text("#error-summary")
    assert "nothing was created" in summary and "Name" in summary
    # The step with the problem is open, its field marked and described, values kept.
    name = page.get_by_label("Workload name")
    assert name.is_visible() and name.get_attribute("aria-invalid") == "true"
    assert "DNS-1123" in page.inner_text("#e-name")
    assert name.input_value() == "Bad_Name"
    assert page.locator("#f-image").input_value() == "nginx:1;id"
    ui.shot("wizard-invalid")
    # Fixed, the service's own checks answer next: the image is no image reference.
    name.fill("good-name")
    expect(page.locator("#create")).to_be_hidden()  # back on the name's step
    _to_summary(ui)
    page.get_by_role("button", name="Create training").click()
    page.wait_for_selector("#error-summary a >> text=Image")
    summary = page.inner_text("#error-summary")
    assert "Image" in summary and "Name" not in summary
    page.locator("#error-summary a", has_text="Image").click()
    assert page.evaluate("document.activeElement.id") == "f-image"
    assert "not an image reference" in page.inner_text("#e-image")
    ui.shot("wizard-invalid-image")
    page.set_viewport_size(NARROW)
    ui.shot("wizard-invalid-narrow")
    assert "Bad_Name" not in _cli(ui, "list", "-A")
    assert "good-name" not in _cli(ui, "list", "-A")
    # The browser logs the refused form's 422s; nothing else went wrong.
    assert not [e for e in ui.console_errors if "422" not in e], ui.console_errors


def _tab_to(ui: UI, element_id: str, limit: int = 80) -> None:
    """Press Tab until ``element_id`` has the focus (keyboard only)."""
    for _ in range(limit):
        if ui.page.evaluate("document.activeElement.id") == element_id:
            return
        ui.page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached #{element_id}")


def _tab_to_continue(ui: UI) -> None:
    for _ in range(80):
        if ui.page.evaluate("document.activeElement.classList.contains('continue')"):
            return
        ui.page.keyboard.press("Tab")
    raise AssertionError("Tab never reached Continue")


def test_keyboard_only_creation(ui: UI):
    _cli(ui, "environment", "create", "pytorch-dt", "-i", "kubeflow/pytorch-dist-mnist:latest",
         "-p", "default")  # fmt: skip
    _cli(ui, "compute", "create", "small-fraction", "-g", "0.1", "--cpu", "0.1",
         "--memory", "100M", "-p", "default")  # fmt: skip
    ui.login(path="/workloads/new")
    keys = ui.page.keyboard
    ui.page.set_viewport_size(NARROW)
    ui.shot("wizard-narrow-1-project")
    _tab_to_continue(ui)
    keys.press("Enter")  # Continue: the name's step, its field focused
    assert ui.page.evaluate("document.activeElement.id") == "f-name"
    keys.type("by-keys")
    ui.page.wait_for_selector("#name-status.name-free")
    ui.shot("wizard-narrow-2-name")
    keys.press("Enter")  # in a field of a step not the last: Continue, not Create
    assert ui.page.evaluate("document.activeElement.id") == "f-environment"
    assert "by-keys" not in _cli(ui, "list", "-A")
    keys.type("pytorch")  # a select takes typed letters
    assert ui.page.locator("#f-environment option:checked").inner_text().startswith("pytorch-dt")
    _tab_to_continue(ui)
    keys.press("Enter")
    _tab_to(ui, "f-compute")
    keys.type("small")
    assert ui.page.locator("#f-compute option:checked").inner_text().startswith("small-fraction")
    ui.shot("wizard-narrow-4-compute")
    _tab_to_continue(ui)
    keys.press("Enter")  # General
    _tab_to(ui, "f-interactive")
    keys.press("Space")
    keys.press("Space")  # on and off again: a checkbox works by keyboard
    _tab_to_continue(ui)
    keys.press("Enter")  # Master
    _tab_to_continue(ui)
    keys.press("Enter")  # Summary
    assert _summary(ui)["Environment"].startswith("pytorch-dt")
    _tab_to(ui, "create")
    keys.press("Space")
    _landed(ui, "by-keys")
    assert "by-keys" in _cli(ui, "list", "-A")
    assert not ui.console_errors, ui.console_errors


def test_without_script_every_step_shows_and_creates(chromium: Any, ui_server: ServerProcess):
    context = chromium.new_context(viewport={"width": 1280, "height": 800},
                                   java_script_enabled=False)  # fmt: skip
    try:
        ui = UI(context.new_page(), ui_server)
        ui.login(path="/workloads/new")
        page = ui.page
        for legend in ("1. Project", "2. Name", "3. Environment", "6. Master", "7. Summary"):
            assert page.get_by_text(legend).is_visible()
        page.get_by_label("Workload name").fill("no-script")
        page.get_by_label("Command").first.fill("python -c 'print(42)'")
        ui.shot("wizard-without-script")
        page.get_by_role("button", name="Create training").click()
        _landed(ui, "no-script")
        assert _phase(ui, "no-script", {"Running", "Completed"})
    finally:
        context.close()


def test_the_project_picker_starts_on_the_project_the_user_works_in(ui: UI):
    _cli(ui, "project", "create", "vision")
    ui.login(path="/workloads/new")
    chosen = lambda: ui.page.locator("#f-project option:checked").inner_text()  # noqa: E731
    assert chosen() == "default"  # no workload yet: the first of the admin's projects
    # The workloads page's project filter is where the user works: NEW WORKLOAD keeps it.
    ui.goto("/workloads?project=vision")
    ui.page.get_by_role("link", name="+ NEW WORKLOAD").click()
    ui.page.wait_for_url("**/workloads/new?project=vision")
    assert chosen() == "vision"
    ui.shot("wizard-1-project-from-filter")
    # Without a filter: the project of the user's latest workload.
    _cli(ui, "submit-dist", "pytorch", "in-vision", "--workers", "1", "--project", "vision",
         "--", "python", "-c", "pass")  # fmt: skip
    ui.goto("/workloads")
    ui.page.get_by_role("link", name="+ NEW WORKLOAD").click()
    ui.page.wait_for_url("**/workloads/new")
    assert chosen() == "vision"
    _continue(ui, "step-project")
    ui.page.get_by_label("Workload name").fill("in-vision")  # checked in the chosen project
    expect(ui.page.locator("#name-status")).to_contain_text("already exists in project 'vision'")
    ui.goto("/workloads/new?project=default")  # asked for: that one
    assert chosen() == "default"


def test_the_created_notice_gives_way_to_the_final_state(ui: UI, tmp_path: Path):
    release = tmp_path / "release"
    waits = f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.1)"
    script = tmp_path / "wait.py"
    script.write_text(waits)
    ui.login(path="/workloads/new")
    page = ui.page
    _continue(ui, "step-project")
    page.get_by_label("Workload name").fill("waiter")
    _continue(ui, "step-name")
    page.get_by_label("Command").first.fill(f"python {script}")
    _to_summary(ui)
    page.get_by_role("button", name="Create training").click()
    page.wait_for_url(re.compile(r".*/workloads/(?!new$)[^/?]+$"))
    notice = page.locator("#notice")
    expect(notice).to_have_text("Workload waiter created")  # it cannot end: it waits
    page.evaluate("window.stillTheSamePage = true")
    release.touch()
    expect(page.locator("#piece-status .workload-status .status")).to_have_text(
        "Completed", timeout=120_000
    )
    expect(notice).to_have_text("Workload waiter has ended: Completed")
    expect(notice.locator(".status-ok")).to_have_text("Completed")
    assert page.evaluate("window.stillTheSamePage") is True  # live, not reloaded
    page.evaluate("window.scrollTo(0, 0)")
    ui.shot("workload-created-then-ended", full_page=False)

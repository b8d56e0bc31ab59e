"""The new-workload wizard, in-process (fast) on both databases: the form -> the API's
spec, every validation path (messages next to fields, values kept, nothing created),
CSRF, the name check, Copy & edit and what a user may pick."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Any

import httpx

from ringleader.spec_limits import MAX_COMMAND_CHARS
from tests.server.conftest import API
from tests.server.ui.forms import HTML, compute_asset, env_asset, wizard_form
from tests.server.ui.forms import login as _login


def _post(api: API, csrf: str, form: dict[str, str]) -> httpx.Response:
    return api.client.post(
        "/workloads/new",
        data={"csrf_token": csrf, **form},
        headers=HTML,
        follow_redirects=False,
    )


def _stored(api: API, workload_id: str) -> dict[str, Any]:
    """The spec as the server stored it (what POST /api/v1/workloads/distributed keeps)."""
    from ringleader.server.models import Workload

    with api.client.app.state.sessions() as s:
        return s.get(Workload, workload_id).spec


def _workloads(api: API) -> list[dict[str, Any]]:
    return api.get("/api/v1/workloads").json()["workloads"]


def _field_error(page: str, field: str) -> str:
    """The message shown next to ``field`` (and the field is marked invalid)."""
    control = re.search(rf'<(?:input|select|textarea) id="f-{field}"[^>]*>', page)
    assert control, f"no control {field}"
    assert 'aria-invalid="true"' in control.group(0), control.group(0)
    assert f"e-{field}" in control.group(0)  # aria-describedby names the message
    message = re.search(rf'<span class="field-error" id="e-{field}">([^<]*)</span>', page)
    assert message, f"no message for {field}"
    assert f'href="#f-{field}"' in page  # the summary links to it
    return html.unescape(message.group(1))


class _FormReader(HTMLParser):
    """What a browser would send for the wizard as shown (no script): every input's
    value, checked boxes and radios, selected options, textareas."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self.select: str | None = None
        self.textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("radio", "checkbox", "submit"):
            self.values[name] = a.get("value") or ""
        elif tag == "input" and name and "checked" in a:
            self.values[name] = a.get("value") or "on"
        elif tag == "select":
            self.select = name
            self.values.setdefault(name or "", "")
        elif tag == "option" and self.select and "selected" in a:
            self.values[self.select] = a.get("value") or ""
        elif tag == "textarea":
            self.textarea = name
            self.values[name or ""] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self.select = None
        if tag == "textarea":
            self.textarea = None

    def handle_data(self, data: str) -> None:
        if self.textarea:
            self.values[self.textarea] += data


def _form_values(page: str) -> dict[str, str]:
    reader = _FormReader()
    reader.feed(page)
    reader.values.pop("csrf_token", None)
    return reader.values


def test_the_wizard_builds_the_same_spec_as_the_api_and_lands_on_the_workload(api: API):
    csrf = _login(api)
    page = api.client.get("/workloads/new", headers=HTML)
    assert page.status_code == 200
    for legend in ("1. Project", "2. Name", "3. Environment", "4. Workers", "5. General"):
        assert legend in page.text
    env, compute = env_asset(api), compute_asset(api)
    form = wizard_form(
        api,
        command="",
        environment=env,
        compute=compute,
        env="LR=0.01\n\nEPOCHS=1",
        cpu_cores="0.5",  # own values win over the asset's, as on the CLI
        preemptibility="non-preemptible",
        priority_class="train",
    )
    answer = _post(api, csrf, form)
    assert answer.status_code == 303, answer.text
    workload_id = answer.headers["location"].removeprefix("/workloads/")
    assert "Workload%20dist%20created" in answer.headers["set-cookie"]
    spec = _stored(api, workload_id)["spec"]
    assert spec["image"] == "kubeflow/pytorch-dist-mnist:latest"
    assert spec["command"] == "python -m ringleader.examples.digits"  # the image's stand-in
    assert spec["numWorkers"] == 2 and spec["distributedFramework"] == "PyTorch"
    assert spec["compute"] == {
        "gpuDevicesRequest": 1,
        "gpuRequestType": "portion",
        "gpuPortionRequest": 0.1,
        "cpuCoreRequest": 0.5,
        "cpuMemoryRequest": "100M",
    }
    assert [(v["name"], v["value"]) for v in spec["environmentVariables"]] == [
        ("LR", "0.01"),
        ("EPOCHS", "1"),
    ]
    assert spec["preemptibility"] == "non-preemptible" and spec["priorityClass"] == "train"
    assert spec["backoffLimit"] == 6


def test_a_different_master_setup_becomes_the_master_spec(api: API):
    csrf = _login(api)
    form = wizard_form(
        api,
        master_differs="on",
        master_command="python -c 'print(0)'",
        master_cpu_cores="1",
        master_gpu_portion="50",
        framework="MPI",
    )
    answer = _post(api, csrf, form)
    assert answer.status_code == 303, answer.text
    (workload,) = _workloads(api)
    stored = _stored(api, workload["id"])
    assert stored["spec"]["distributedFramework"] == "MPI"
    assert stored["masterSpecSameAsWorker"] is False
    assert stored["masterSpec"]["command"] == "python -c 'print(0)'"
    assert stored["masterSpec"]["compute"] == {
        "cpuCoreRequest": 1.0,
        "gpuRequestType": "portion",
        "gpuPortionRequest": 0.5,
        "gpuDevicesRequest": 1,
    }


def test_every_problem_is_shown_by_its_field_values_kept_nothing_created(api: API):
    csrf = _login(api)
    form = wizard_form(
        api,
        name="Bad_Name",
        command="python 'unclosed",
        env="GOOD=1\nnot a pair",
        workers="two",
        gpu_portion="150",
        cpu_memory="lots",
        backoff_limit="-1",
    )
    answer = _post(api, csrf, form)
    assert answer.status_code == 422
    page = answer.text
    assert "DNS-1123" in _field_error(page, "name")
    assert "never closed" in _field_error(page, "command")
    assert "line 2: expected NAME=value" in _field_error(page, "env")
    assert "whole number" in _field_error(page, "workers")
    assert "between 0 and 100" in _field_error(page, "gpu_portion")
    assert "not a memory quantity" in _field_error(page, "cpu_memory")
    assert _field_error(page, "backoff_limit") == "must be at least 0"  # not pydantic's voice
    assert "nothing was created" in page
    # What was typed is still there.
    assert 'value="Bad_Name"' in page and "python &#39;unclosed</textarea>" in page
    assert 'value="two"' in page and "GOOD=1\nnot a pair</textarea>" in page
    assert _workloads(api) == []


def test_service_refusals_land_on_their_fields(api: API):
    csrf = _login(api)
    # No command and not interactive: the service's InvalidSpec, where=spec.command.
    answer = _post(api, csrf, wizard_form(api, command=""))
    assert answer.status_code == 422
    assert "a command is required" in _field_error(answer.text, "command")
    # What is no image reference (shell syntax): where=spec.image.
    answer = _post(api, csrf, wizard_form(api, image="nginx:1;id"))
    assert "not an image reference" in _field_error(answer.text, "image")
    # An unknown priority class.
    answer = _post(api, csrf, wizard_form(api, priority_class="vip"))
    assert "unknown priority class" in _field_error(answer.text, "priority_class")
    # A taken name: the form says so, and only one workload exists.
    assert _post(api, csrf, wizard_form(api)).status_code == 303
    answer = _post(api, csrf, wizard_form(api))
    assert answer.status_code == 422
    assert "already exists" in _field_error(answer.text, "name")
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", _field_error(answer.text, "name"))  # no ids
    # No project chosen, and an unknown asset.
    answer = _post(api, csrf, wizard_form(api, project="", environment="nope"))
    assert "choose a project" in _field_error(answer.text, "project")
    assert "no such environment" in _field_error(answer.text, "environment")
    assert len(_workloads(api)) == 1


def test_a_bad_value_from_an_asset_is_blamed_on_the_asset(api: API):
    csrf = _login(api)
    env = env_asset(api, "nginx", image="nginx:1;id", command="run")
    answer = _post(api, csrf, wizard_form(api, command="", environment=env))
    assert answer.status_code == 422
    assert "not an image reference" in _field_error(answer.text, "environment")
    assert _workloads(api) == []


def test_new_environment_and_compute_are_saved_selected_and_nothing_else(api: API):
    """The panels hold every field their asset saves (seed 002: + NEW ENVIRONMENT, a
    name, the Image URL, CREATE ENVIRONMENT); the workload's own fields are not saved."""
    csrf = _login(api)
    page = api.get("/workloads/new").text
    for label in ("Environment name", "Image URL", "Compute resource name"):
        assert f">{label}</label>" in page
    form = wizard_form(
        api,
        image="not/this:one",
        new_environment_name="pytorch-dt",
        new_environment_image="kubeflow/pytorch-dist-mnist:latest",
        new_environment_env="EPOCHS=3",
        action="create-environment",
    )
    answer = _post(api, csrf, form)
    assert answer.status_code == 200, answer.text
    assert "Environment pytorch-dt created and selected." in answer.text
    (env,) = api.get("/api/v1/asset/environment").json()["entries"]
    assert env["spec"]["image"] == "kubeflow/pytorch-dist-mnist:latest"
    assert env["spec"]["environmentVariables"][0]["name"] == "EPOCHS"
    assert "command" not in env["spec"] or not env["spec"]["command"]  # the workload's own
    assert re.search(rf'<option value="{env["meta"]["id"]}"[^>]* selected>pytorch-dt', answer.text)
    assert 'value="dist"' in answer.text  # the rest of the form is kept
    # The seed's small-fraction: 1 device, 10% of it, 0.1 cores, 100M.
    form = wizard_form(
        api,
        new_compute_gpu_portion="10",
        new_compute_cpu_cores="0.1",
        new_compute_cpu_memory="100M",
        new_compute_name="small-fraction",
        action="create-compute",
    )
    answer = _post(api, csrf, form)
    assert answer.status_code == 200, answer.text
    (compute,) = api.get("/api/v1/asset/compute").json()["entries"]
    assert compute["spec"]["gpuPortionRequest"] == 0.1 and compute["spec"]["gpuDevicesRequest"] == 1
    # A taken or a missing name: an error by the name, no second asset.
    answer = _post(api, csrf, form)
    assert answer.status_code == 422
    assert "already exists" in _field_error(answer.text, "new_compute_name")
    answer = _post(api, csrf, {**form, "new_compute_name": "", "new_compute_gpu_memory": "4G"})
    assert "give the new compute resource a name" in _field_error(answer.text, "new_compute_name")
    assert "choose GPU request" in _field_error(answer.text, "new_compute_gpu_memory")
    assert re.search(r'<details class="new-asset" open>\s*<summary>\+ New compute', answer.text)
    assert len(api.get("/api/v1/asset/compute").json()["entries"]) == 1
    assert _workloads(api) == []


def test_creating_needs_the_csrf_token_and_this_origin(api: API):
    csrf = _login(api)
    refused = api.client.post("/workloads/new", data=wizard_form(api), headers=HTML)
    assert refused.status_code == 403
    cross = api.client.post(
        "/workloads/new",
        data={"csrf_token": csrf, **wizard_form(api)},
        headers={**HTML, "Origin": "http://evil.example"},
    )
    assert cross.status_code == 403
    assert _workloads(api) == []


def test_the_name_check_says_free_taken_or_invalid(api: API):
    csrf = _login(api)
    project = api.project_id()

    def check(name: str, project: str = project) -> dict[str, Any]:
        answer = api.client.get(
            "/workloads/new/name-check",
            params={"project": project, "name": name},
            headers={"X-Requested-With": "fetch"},
        )
        assert answer.status_code == 200
        return answer.json()

    assert check("dist")["available"] is True
    assert _post(api, csrf, wizard_form(api)).status_code == 303
    taken = check("dist")
    assert taken["available"] is False and "already exists" in taken["message"]
    assert "Not a valid name" in check("Dist!")["message"]
    assert check("dist", project="")["message"] == "Choose a project first."


def test_copy_and_edit_prefills_the_form_with_a_free_name(api: API):
    csrf = _login(api)
    form = wizard_form(api, env="A=1", cpu_cores="0.5", gpu_portion="20", workers="3")
    assert _post(api, csrf, form).status_code == 303
    (workload,) = _workloads(api)
    page = api.client.get(f"/workloads/new?copy={workload['id']}", headers=HTML)
    assert page.status_code == 200
    text = page.text
    assert 'value="dist-copy"' in text and "A copy of workload" in text
    assert 'id="f-workers" name="workers" type="number" value="3"' in text
    assert 'value="0.5"' in text and 'value="20"' in text and "A=1</textarea>" in text
    # Created as it is shown, the copy is the same spec under its new name.
    prefilled = _form_values(text)
    assert prefilled["name"] == "dist-copy"
    answer = _post(api, csrf, prefilled)
    assert answer.status_code == 303, answer.text
    copy = _stored(api, answer.headers["location"].removeprefix("/workloads/"))
    original = _stored(api, workload["id"])
    assert copy["spec"] == original["spec"] and copy["name"] == "dist-copy"
    page = api.client.get(f"/workloads/new?copy={workload['id']}", headers=HTML)
    assert 'value="dist-copy-2"' in page.text


def _researcher(api: API, name: str) -> tuple[str, str]:
    """A researcher of project default only; their access key."""
    from ringleader.server.auth import create_access_key
    from ringleader.server.models import User

    with api.client.app.state.sessions() as s, s.begin():
        user = User(name=name, is_admin=False)
        s.add(user)
        s.flush()
        key = create_access_key(s, user)
        creds = (key.client_id, key.client_secret)
    put = api.put(f"/api/v1/org-unit/projects/default/members/{name}", json={"role": "researcher"})
    assert put.status_code == 200, put.text
    return creds


def test_a_user_sees_and_picks_only_their_projects_and_assets(api: API):
    assert api.post("/api/v1/org-unit/projects", json={"name": "team-b"}).status_code in (200, 201)
    other_env = env_asset(api, "secret-env", project="team-b")
    env_asset(api, "mine", project="default")
    creds = _researcher(api, "rita")
    csrf = _login(api, *creds)
    page = api.client.get("/workloads/new", headers=HTML).text
    assert ">default</option>" in page and "team-b" not in page
    assert "mine" in page and "secret-env" not in page
    # Picking them anyway: another project's asset is not found, the project too.
    answer = _post(api, csrf, wizard_form(api, environment=other_env))
    assert "no such environment" in _field_error(answer.text, "environment")
    answer = _post(api, csrf, wizard_form(api, project=api.project_id("team-b")))
    assert "no such project" in _field_error(answer.text, "project")
    # Copying another project's workload: not found.
    made = api.submit("theirs", "python -c 'print(1)'", project="team-b")
    assert made.status_code == 202
    theirs = made.json()["workloadId"]
    assert api.client.get(f"/workloads/new?copy={theirs}", headers=HTML).status_code == 404
    assert len(_workloads(api)) == 1  # the admin's only


def test_bounds_an_unknown_action_and_a_viewer_are_refused_by_their_fields(api: API):
    creds = _researcher(api, "vic")
    csrf = _login(api)
    answer = _post(api, csrf, wizard_form(api, working_dir="/x" * 3000))
    assert answer.status_code == 422
    assert "at most 4096 characters" in _field_error(answer.text, "working_dir")
    # A command longer than one exec argument can take: refused by the API's one bound.
    answer = _post(api, csrf, wizard_form(api, command="a" * 200_000))
    assert answer.status_code == 422
    assert f"at most {MAX_COMMAND_CHARS} characters" in _field_error(answer.text, "command")
    assert len(answer.text) < 3 * MAX_COMMAND_CHARS  # shown again cut, not 200 KB twice
    answer = _post(api, csrf, wizard_form(api, action="launch-missiles"))
    assert answer.status_code == 400 and "unknown action" in answer.text
    put = api.put("/api/v1/org-unit/projects/default/members/vic", json={"role": "viewer"})
    assert put.status_code == 200, put.text
    csrf = _login(api, *creds)
    answer = _post(api, csrf, wizard_form(api))
    assert answer.status_code == 422
    assert "a viewer of project 'default' cannot" in _field_error(answer.text, "project")
    answer = _post(
        api, csrf, wizard_form(api, new_environment_name="env", action="create-environment")
    )
    assert "cannot create its assets" in _field_error(answer.text, "project")
    assert _workloads(api) == [] and api.get("/api/v1/asset/environment").json()["entries"] == []


def test_the_framework_step_offers_the_registrys_and_each_is_created_as_chosen(api: API):
    """TensorFlow, JAX and XGBoost join PyTorch and MPI (issue 25), from the registry:
    each labelled, each stored as its spec name."""
    csrf = _login(api)
    page = api.client.get("/workloads/new", headers=HTML).text
    offered = re.findall(r'name="framework" value="([^"]+)" data-head="([^"]*)"', page)
    assert offered == [("PyTorch", "master"), ("MPI", "launcher"), ("TF", "chief"),
                       ("JAX", ""), ("XGBoost", "master")]  # fmt: skip
    assert re.search(r'value="TF" data-head="chief"[^>]*> TensorFlow</label>', page)
    for framework in ("TF", "JAX", "XGBoost"):
        form = wizard_form(api, framework=framework, name=f"fw-{framework.lower()}",
                     topology="workers", gpu_request_type="")  # fmt: skip
        answer = _post(api, csrf, form)
        assert answer.status_code == 303, answer.text
        workload_id = answer.headers["location"].removeprefix("/workloads/")
        assert _stored(api, workload_id)["spec"]["distributedFramework"] == framework

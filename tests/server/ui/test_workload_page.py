"""The workload page in-process: what it shows, its CLI command and API body, its
live logs (cursor, pod filter, bound, download), visibility and CSRF."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest
from typer.testing import CliRunner

from ringleader.server.auth import create_access_key
from ringleader.server.models import User
from ringleader.server.ui import workload_logs, workload_page
from ringleader.shellwords import split_command
from tests.conftest import wait_until
from tests.server.conftest import API, SQLITE_ONLY
from tests.server.ui.forms import FETCH, HTML, login

# Prints one line per pod and a traceback-free goodbye; quick on a 2-core box.
HELLO = "python -c \"import os; print('hello from', os.environ.get('RANK'))\""


def outsider(api: API) -> tuple[str, str]:
    """A user in no project: its access key."""
    with api.client.app.state.sessions() as s, s.begin():
        user = User(name="outsider", is_admin=False)
        s.add(user)
        s.flush()
        key = create_access_key(s, user)
    return key.client_id, key.client_secret


def submitted(api: API, name: str, command: str, workers: int = 1, **spec: Any) -> str:
    answer = api.submit(name, command, workers=workers, **spec)
    assert answer.status_code == 202, answer.text
    return answer.json()["workloadId"]


def stored_spec(api: API, workload_id: str) -> dict[str, Any]:
    return api.get(f"/api/v1/workloads/{workload_id}").json()["spec"]


@SQLITE_ONLY
def test_the_page_shows_the_spec_pods_events_and_how_to_submit_it_again(api: API, monkeypatch):
    variables = [
        {"name": "MODE", "value": "fast run"},
        {"name": "HF_TOKEN", "value": "hunter2-very-secret"},
    ]
    wid = submitted(
        api,
        "hello",
        HELLO,
        args="--flag 'two words'",
        environmentVariables=variables,
        compute={"cpuCoreRequest": 0.5, "cpuMemoryRequest": "100M"},
        backoffLimit=0,
        workingDir="/tmp",
    )
    api.wait_phase(wid, {"Completed"})
    login(api)
    page = api.client.get(f"/workloads/{wid}", headers=HTML)
    assert page.status_code == 200, page.text
    text = page.text
    assert "hunter2" not in text  # a secret-named variable is never shown
    assert "MODE=fast run" in text and "HF_TOKEN=&lt;redacted&gt;" in text
    for pod in ("hello-master-0", "hello-worker-0"):
        assert pod in text
    assert "Submitted" in text and "Completed" in text
    assert f"/workloads/new?copy={wid}" in text
    assert "CPU memory 100 MB" in text  # compute in the units the wizard asks in
    # Narrow windows show each pod and event as a card, each value captioned.
    for label in ("Pod", "Node", "GPU allocation", "Exit code", "Started"):
        assert f'<td data-label="{label}"' in text.split('id="piece-pods"')[1]
    for label in ("Time", "Event", "Phase", "Message"):
        assert f'<td data-label="{label}"' in text.split('id="piece-events"')[1]
    # Ended: nothing to follow, so no Pause/Follow button.
    assert re.search(r'<button type="button" id="log-follow"[^>]* hidden>', text)
    copied = api.client.get(f"/workloads/new?copy={wid}", headers=HTML)  # Copy & edit: the wizard
    assert copied.status_code == 200 and "hello-copy" in copied.text

    # The API body, POSTed back under another name, gives an equal spec.
    body = json.loads(_pre(text, "body-text"))
    original = stored_spec(api, wid)
    assert body == {**original, "spec": {**original["spec"], "environmentVariables": [
        variables[0], {"name": "HF_TOKEN", "value": "<redacted>"}]}}  # fmt: skip
    again = api.post("/api/v1/workloads/distributed", json={**body, "name": "hello-again"})
    assert again.status_code == 202, again.text
    copy = stored_spec(api, again.json()["workloadId"])
    assert {**copy, "name": "hello"} == body

    # The CLI command, parsed by the real CLI, builds the same spec (the secret aside).
    command = _pre(text, "cli-text")
    assert " \\\n    -e 'HF_TOKEN=<redacted>' \\\n" in command  # a flag a line
    words = shlex.split(command.replace("\\\n", " "))
    assert words[:3] == ["ringleader", "distributed", "submit"]
    made = _cli_spec(monkeypatch, words[1:])
    for field in ("command", "args"):  # the CLI quotes words its own way: the same words
        assert split_command(made["spec"].pop(field)) == split_command(body["spec"].pop(field))
    assert made["spec"] == body["spec"] and made["name"] == body["name"]
    assert made["projectId"] == "default"  # -p takes the project's name


def test_compute_values_read_in_the_units_the_wizard_asks_in():
    value = workload_page.compute_value
    assert value("gpuPortionRequest", 0.1) == "10% of a GPU"
    assert value("gpuPortionLimit", 0.25) == "25% of a GPU"
    assert value("gpuMemoryRequest", "4Gi") == "4 GiB"
    assert value("gpuMemoryLimit", "1500M") == "1500 MB"
    assert value("cpuMemoryRequest", "1048576") == "1048576 bytes"
    assert value("cpuCoreRequest", 0.5) == "0.5"
    assert value("gpuDevicesRequest", 2) == "2"


def _pre(html: str, element_id: str) -> str:
    import html as entities

    found = re.search(rf'<pre id="{element_id}"[^>]*>(.*?)</pre>', html, re.DOTALL)
    assert found, element_id
    return entities.unescape(found.group(1))


def _cli_spec(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> dict[str, Any]:
    """What ``ringleader ARGV`` would send, by the real parser, without sending it."""
    from ringleader.cli import submit as v1_submit
    from ringleader.cli.main import typer_app

    caught: dict[str, Any] = {}

    def capture(options: Any, framework: Any = None) -> Any:
        caught["spec"] = options.spec(None).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        raise SystemExit(0)

    monkeypatch.setattr(v1_submit, "submit", capture)
    result = CliRunner().invoke(typer_app(), argv, prog_name="ringleader")
    assert "spec" in caught, result.output
    return caught["spec"]


@SQLITE_ONLY
def test_live_logs_come_once_by_cursor_per_pod_bounded_and_download_whole(api: API, monkeypatch):
    lines = "python -c \"import os; [print('line', i, os.environ['RANK']) for i in range(12)]\""
    wid = submitted(api, "chatty", lines, workers=1)
    api.wait_phase(wid, {"Completed"})
    login(api)
    path = f"/workloads/{wid}/logs/live"
    first = api.client.get(path, headers=FETCH).json()
    pods = {line["pod"] for line in first["lines"] if line["text"].startswith("line ")}
    assert pods == {"chatty-master-0", "chatty-worker-0"}
    assert first["skipped"] == 0
    again = api.client.get(path, params={"cursor": first["cursor"]}, headers=FETCH).json()
    assert again["lines"] == [] and again["cursor"] == first["cursor"]
    one = api.client.get(path, params={"pod": "worker-0"}, headers=FETCH).json()
    assert {line["pod"] for line in one["lines"]} == {"chatty-worker-0"}

    monkeypatch.setattr(workload_logs, "MAX_LINES", 5)
    bounded = api.client.get(path, headers=FETCH).json()
    assert len(bounded["lines"]) == 5 and bounded["skipped"] == len(first["lines"]) - 5
    assert bounded["lines"] == [workload_logs.split_line(f"[{x['pod']}] {x['text']}") for x in
                                first["lines"][-5:]]  # fmt: skip

    refused = api.client.get(path, params={"cursor": "nonsense"}, headers=FETCH)
    assert refused.status_code == 422 and "cursor" in refused.text
    assert api.client.get(path, params={"pod": "nope"}, headers=FETCH).status_code == 422

    download = api.client.get(f"/workloads/{wid}/logs/download", params={"pod": "master-0"})
    assert download.status_code == 200
    assert download.headers["content-disposition"] == 'attachment; filename="chatty-master-0.log"'
    assert download.headers["content-type"].startswith("text/plain")
    assert download.text.count("[chatty-master-0] line ") == 12
    assert "worker" not in download.text


def test_another_projects_workload_is_not_found_on_every_path(api: API):
    wid = submitted(api, "private", "python -c pass")
    client_id, secret = outsider(api)
    token = login(api, client_id, secret)
    page = api.client.get(f"/workloads/{wid}", headers=HTML)
    assert page.status_code == 404 and "private" not in page.text
    for suffix in ("/live", "/logs/live", "/logs/download", "/metrics"):
        answer = api.client.get(f"/workloads/{wid}{suffix}", headers=FETCH)
        assert answer.status_code == 404, suffix
    for action in ("suspend", "resume", "delete"):
        answer = api.client.post(
            f"/workloads/{wid}/{action}",
            data={"csrf_token": token, "confirmed": "yes"},
            headers=HTML,
        )
        assert answer.status_code == 404, action
    assert api.get(f"/api/v1/workloads/{wid}").json()["desiredPhase"] == "Running"


def test_actions_need_the_csrf_token_and_call_the_apis_services(api: API, monkeypatch):
    wid = submitted(api, "sleepy", "python -c 'import time; time.sleep(600)'")
    api.wait_phase(wid, {"Running"})
    token = login(api)
    live = api.client.get(f"/workloads/{wid}/live", headers=FETCH).json()
    assert live["phase"] == "Running" and not live["final"] and "Stop" in live["pieces"]["actions"]
    same = api.client.get(
        f"/workloads/{wid}/live", params={"version": live["version"]}, headers=FETCH
    )
    assert same.json()["same"] is True and len(same.content) < 200

    forged = api.client.post(f"/workloads/{wid}/suspend", headers=HTML, follow_redirects=False)
    assert forged.status_code == 403
    cross = api.client.post(
        f"/workloads/{wid}/suspend",
        data={"csrf_token": token},
        headers={**HTML, "Origin": "http://evil.example"},
        follow_redirects=False,
    )
    assert cross.status_code == 403
    assert api.get(f"/api/v1/workloads/{wid}").json()["desiredPhase"] == "Running"

    stopped = api.client.post(
        f"/workloads/{wid}/suspend",
        data={"csrf_token": token, "back": f"/workloads/{wid}"},
        headers=HTML,
        follow_redirects=False,
    )
    assert stopped.status_code == 303 and stopped.headers["location"] == f"/workloads/{wid}"
    api.wait_phase(wid, {"Stopped"})
    page = api.client.get(f"/workloads/{wid}", headers=HTML).text
    assert "Stopping sleepy." in page and f'action="/workloads/{wid}/resume"' in page
    monkeypatch.setattr(workload_page, "MAX_EVENTS", 3)  # a page shows the newest events
    cut = api.client.get(f"/workloads/{wid}", headers=HTML).text
    assert "The latest 3 events" in cut and "Stopped" in cut.split('id="piece-events"')[1]
    deleted = api.client.post(
        f"/workloads/{wid}/delete",
        data={"csrf_token": token, "back": f"/workloads/{wid}", "confirmed": "yes"},
        headers=HTML,
        follow_redirects=False,
    )
    assert deleted.status_code == 303 and deleted.headers["location"] == "/workloads"
    gone = lambda: api.get(f"/api/v1/workloads/{wid}").status_code == 404  # noqa: E731
    wait_until(gone, 60, "the deleted workload to be gone")
    assert api.client.get(f"/workloads/{wid}/live", headers=FETCH).status_code == 404

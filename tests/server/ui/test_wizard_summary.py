"""The wizard's Summary step, in-process: what CREATE would make, the assets by name
and what they fill in, words where nothing is set, problems before CREATE is pressed;
and the project a new form starts on (where the user works)."""

from __future__ import annotations

import re
from html import unescape

from tests.server.conftest import API
from tests.server.ui.forms import FETCH, HTML, compute_asset, env_asset, wizard_form
from tests.server.ui.forms import login as _login


def _recap(page: str) -> dict[str, str]:
    rows = re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", page)
    return {unescape(k): unescape(v) for k, v in rows}


def _summary(api: API, csrf: str, **fields: str) -> dict[str, str]:
    answer = api.client.post(
        "/workloads/new/summary",
        data={"csrf_token": csrf, **wizard_form(api, **fields)},
        headers={**FETCH, "X-CSRF-Token": csrf},
    )
    assert answer.status_code == 200, answer.text
    return _recap(answer.text)


def test_the_summary_names_the_assets_and_what_they_fill_in(api: API):
    csrf = _login(api)
    env = env_asset(api, working_dir="/workspace", command="python train.py")
    compute = compute_asset(api)
    shown = _summary(api, csrf, environment=env, compute=compute, command="")
    assert shown["Environment"] == "pytorch-dt (kubeflow/pytorch-dist-mnist:latest)"
    assert shown["Image"] == "kubeflow/pytorch-dist-mnist:latest"
    assert shown["Command"] == "python train.py"
    assert shown["Working directory"] == "/workspace"
    assert shown["Compute resource"] == "small-fraction (1 GPU x 10%, 0.1 CPU, 100M)"
    assert "GPU portion 10% of a GPU" in shown["Compute per pod"]
    assert shown["Type"] == "PyTorch distributed training: a master and 2 workers"
    assert "To fix first" not in shown
    own = _summary(api, csrf, environment=env, working_dir="/data/run")  # typed: it wins
    assert own["Working directory"] == "/data/run"
    assert own["Command"] == "python -c 'print(1)'"
    assert not _workloads_made(api)


def test_without_assets_every_row_says_what_is_used_and_problems_come_first(api: API):
    csrf = _login(api)
    shown = _summary(api, csrf, workers="0", name="")
    assert shown["Environment"].startswith("none chosen")
    assert shown["Image"].startswith("none: the command runs as a process")
    assert shown["Working directory"].startswith("not set: the workload's own work directory")
    assert shown["Compute per pod"].startswith("nothing asked")
    assert shown["Name"] == "not given yet (step 2)"
    assert "Workers: must be at least 1" in shown["To fix first"], shown
    assert "Name" not in shown["To fix first"]  # not given yet: its row says so
    assert "-" not in shown.values()
    # The page itself (no script) carries the summary of the form as loaded.
    page = api.client.get("/workloads/new", headers=HTML).text
    assert _recap(page)["Project"] == "default"


def test_the_summary_needs_the_csrf_token(api: API):
    _login(api)
    answer = api.client.post("/workloads/new/summary", data=wizard_form(api), headers=FETCH)
    assert answer.status_code == 403


def _workloads_made(api: API) -> list[object]:
    return api.get("/api/v1/workloads").json()["workloads"]


def test_a_new_form_starts_on_the_project_the_user_works_in(api: API):
    _login(api)
    made = api.post("/api/v1/org-unit/projects", json={"name": "alpha"})
    assert made.status_code in (200, 201, 202), made.text

    def chosen(path: str = "/workloads/new") -> str:
        page = api.client.get(path, headers=HTML).text
        found = re.search(r'<option value="[^"]+" selected>([^<]+)</option>', page)
        assert found, page
        return found.group(1)

    assert chosen() == "alpha"  # no workload yet: the first of the user's projects
    assert chosen("/workloads/new?project=default") == "default"  # asked for
    api.submit("one", "python -c pass")  # in default: where the user works now
    assert chosen() == "default"
    assert chosen("/workloads/new?project=alpha") == "alpha"


def test_the_summary_reads_without_the_write_lock(api: API):
    """It only reads: while another writer holds the database's write lock (a background
    loop's commit, say), opening the Summary step still answers at once instead of
    waiting its turn on the writer (on SQLite, one connection) with the loop blocked."""
    from sqlalchemy import text

    csrf = _login(api)
    with api.client.app.state.sessions() as writer:
        writer.execute(text("UPDATE users SET name = name WHERE 1 = 0"))  # takes the lock
        shown = _summary(api, csrf)
        writer.rollback()
    assert shown["Type"].startswith("PyTorch distributed training")

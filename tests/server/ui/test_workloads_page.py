"""The workloads page in-process (both databases): filters, sort, search, pages,
visibility, the live update, actions with CSRF, and bad query parameters."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest

from ringleader.server import phases
from ringleader.server.db import utcnow
from ringleader.server.models import Pod, Workload
from tests.conftest import wait_until
from tests.helpers.workloads_page import insert, names, researcher
from tests.server.conftest import API
from tests.server.ui.forms import FETCH, HTML, login


def phase_of(api: API, workload_id: str) -> str:
    with api.client.app.state.sessions() as s:
        return s.get(Workload, workload_id).phase


def test_the_empty_page_says_how_to_create_one(api: API):
    login(api)
    page = api.client.get("/workloads", headers=HTML)
    assert page.status_code == 200
    assert "No workloads yet — " in page.text and 'href="/workloads/new">create one' in page.text
    assert "+ NEW WORKLOAD" in page.text and "0 workloads" in page.text


def test_filter_search_sort_and_pages_are_query_parameters(api: API):
    phases = ["Completed", "Failed", "Stopped"]
    insert(api, [{"name": f"job-{i:02d}", "phase": phases[i % 3]} for i in range(30)])
    login(api)
    get = lambda query: api.client.get("/workloads" + query, headers=HTML)  # noqa: E731
    first = get("?size=10")
    assert first.status_code == 200
    assert names(first.text) == [f"job-{i:02d}" for i in range(29, 19, -1)]  # newest first
    assert "1–10 of 30" in first.text and "Page 1 of 3" in first.text
    assert names(get("?size=10&page=3").text)[-1] == "job-00"
    by_name = get("?sort=name&order=asc&size=25&page=2").text
    assert names(by_name) == ["job-25", "job-26", "job-27", "job-28", "job-29"]
    assert 'aria-sort="ascending"' in by_name
    failed = get("?status=Failed").text
    assert set(names(failed)) == {f"job-{i:02d}" for i in range(1, 30, 3)}
    assert names(get("?search=JOB-1").text) == [f"job-1{i}" for i in range(9, -1, -1)]
    assert names(get("?search=job-0&status=Stopped&sort=name&order=asc").text) == [
        "job-02",
        "job-05",
        "job-08",
    ]
    assert "No workloads match these filters" in get("?search=nothing").text
    # What no name can hold (a space, "_", "*", ",") finds nothing; it is no error.
    for odd in ("job 1", "job_1", "job*", "a,b"):
        answer = get("?" + urlencode({"search": odd}))
        assert answer.status_code == 200 and names(answer.text) == [], odd
        assert "names have only lowercase letters" in answer.text
    # Past the last page: the last page.
    assert names(get("?size=10&page=99").text)[-1] == "job-00"


def test_sort_by_completion_time_on_the_page_and_in_the_api(api: API):
    now = utcnow()
    insert(
        api,
        [
            {"name": "ends-last", "completed_at": now},
            {"name": "ends-first", "completed_at": now - timedelta(hours=2)},
            {"name": "ends-between", "completed_at": now - timedelta(hours=1)},
        ],
    )
    login(api)
    page = api.client.get("/workloads?sort=completed&order=asc", headers=HTML).text
    assert names(page) == ["ends-first", "ends-between", "ends-last"]
    assert 'aria-sort="ascending"' in page
    listed = api.get("/api/v1/workloads", params={"sortBy": "completedAt", "sortOrder": "desc"})
    assert [w["name"] for w in listed.json()["workloads"]] == [
        "ends-last",
        "ends-between",
        "ends-first",
    ]
    since = (now - timedelta(minutes=90)).isoformat()
    recent = api.get("/api/v1/workloads/count", params={"filterBy": f"completedAt>={since}"})
    assert recent.json() == {"count": 2}


# Stopped workloads holding Running pods: no loop touches them (only polled and
# ended ones are reconciled), so the running counts stay as inserted.
SIZED = [
    {"name": "p-none", "workers": 1, "compute": {}, "running": 0},
    {
        "name": "p-frac",
        "workers": 3,
        "compute": {"gpuDevicesRequest": 1, "gpuPortionRequest": 0.5, "cpuCoreRequest": 2},
        "running": 2,
    },
    {"name": "p-two", "workers": 1, "compute": {"gpuDevicesRequest": 2, "cpuCoreRequest": 1}},
    {"name": "p-one", "workers": 2, "compute": {"gpuDevicesRequest": 1, "cpuCoreRequest": 0.5}},
    {"name": "p-tie", "workers": 1, "compute": {"gpuDevicesRequest": 2, "cpuCoreRequest": 1}},
]
RUNNING = {"p-none": 0, "p-frac": 2, "p-two": 1, "p-one": 2, "p-tie": 0}
for _row in SIZED:
    _row |= {"phase": "Stopped", "running": RUNNING[_row["name"]]}


def expected(ids: dict[str, str], figure: dict[str, float], order: str) -> list[str]:
    """Names by ``figure`` in ``order``; ties by id in the same order (the second key)."""
    return sorted(ids, key=lambda name: (figure[name], ids[name]), reverse=order == "desc")


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_sort_by_pods_gpu_and_cpu_columns_in_sql(api: API, order: str):
    ids = dict(zip([r["name"] for r in SIZED], insert(api, SIZED), strict=True))
    login(api)
    shown = {
        w["name"]: w for w in api.get("/api/v1/workloads", params={"limit": 50}).json()["workloads"]
    }
    # The figures the table shows (the API's views), against which the sorts are checked.
    assert {n: w["runningPods"] for n, w in shown.items()} == RUNNING
    assert {n: w["requestedPods"] for n, w in shown.items()} == {
        "p-none": 2, "p-frac": 4, "p-two": 2, "p-one": 3, "p-tie": 2,
    }  # fmt: skip
    gpus = {n: w["requestedGpus"] for n, w in shown.items()}
    assert gpus == {"p-none": 0, "p-frac": 2.0, "p-two": 4, "p-one": 3, "p-tie": 4}
    cpu = {"p-none": 0, "p-frac": 8, "p-two": 2, "p-one": 1.5, "p-tie": 2}
    for column, figure in (("pods", RUNNING), ("gpu", gpus), ("cpu", cpu)):
        page = api.client.get(f"/workloads?sort={column}&order={order}", headers=HTML).text
        assert names(page) == expected(ids, figure, order), column
        found = re.findall(r'aria-sort="(\w+)"[^>]*><a href="/workloads\?sort=(\w+)', page)
        headers = {key: aria for aria, key in found}
        assert headers[column] == ("ascending" if order == "asc" else "descending")
        assert all(aria == "none" for key, aria in headers.items() if key != column)
    for field, figure in (
        ("runningPods", RUNNING),
        ("requestedPods", {n: w["requestedPods"] for n, w in shown.items()}),
        ("requestedGpus", gpus),
        ("requestedCpuCores", cpu),
    ):
        listed = api.get("/api/v1/workloads", params={"sortBy": field, "sortOrder": order})
        assert listed.status_code == 200, listed.text
        assert [w["name"] for w in listed.json()["workloads"]] == expected(ids, figure, order)
    # A page of the sorted list is a slice of the whole order (offset and limit in SQL).
    second = api.get(
        "/api/v1/workloads",
        params={"sortBy": "runningPods", "sortOrder": order, "offset": 2, "limit": 2},
    )
    assert [w["name"] for w in second.json()["workloads"]] == expected(ids, RUNNING, order)[2:4]


def test_a_new_sort_header_is_a_plain_link_that_starts_with_the_largest(api: API):
    insert(api, SIZED)
    login(api)
    page = api.client.get("/workloads", headers=HTML).text
    for column in ("pods", "gpu", "cpu"):
        assert (
            f'<th scope="col" aria-sort="none" class="num"><a href="/workloads?sort={column}"'
            in page
        )
    assert '<span class="sr-only"> (sorts by running)</span>' in page  # which figure sorts
    assert '<option value="gpu">GPU (requested)</option>' in page  # the narrow layout's choice
    again = api.client.get("/workloads?sort=gpu", headers=HTML).text  # desc is the default
    assert 'href="/workloads?sort=gpu&amp;order=asc"' in again


def test_the_row_counts_what_its_spec_asks_and_its_running_pods_as_the_api_does(
    sim_api: API,
):
    """A real workload (on a simulated node with GPUs): the stored figures are the API's."""
    api = sim_api
    body = {
        "name": "sized",
        "projectId": "default",
        "spec": {
            "command": "sleep 30",
            "numWorkers": 2,
            "compute": {"gpuDevicesRequest": 1, "gpuPortionRequest": 0.25, "cpuCoreRequest": 0.5},
        },
    }
    created = api.post("/api/v1/workloads/distributed", json=body)
    assert created.status_code == 202, created.text
    workload_id = created.json()["workloadId"]

    def stored() -> tuple[int, int, float, float]:
        with api.client.app.state.sessions() as s:
            row = s.get(Workload, workload_id)
            return row.running_pods, row.requested_pods, row.requested_gpus, row.requested_cpu_cores

    assert stored()[1:] == (3, 0.75, 1.5)
    shown = wait_until(
        lambda: (w := api.get(f"/api/v1/workloads/{workload_id}").json())["runningPods"] == 3 and w,
        120,
        "its 3 pods to run",
    )
    assert stored() == (3, shown["requestedPods"], shown["requestedGpus"], 1.5)
    api.delete(f"/api/v1/workloads/distributed/{workload_id}")
    wait_until(lambda: stored()[0] == 0, 60, "its pods to stop, counted on the row")
    bad = api.get("/api/v1/workloads", params={"sortBy": "gpus"})
    assert bad.status_code == 422 and "requestedGpus" in bad.text and "runningPods" in bad.text


def test_every_writer_of_pod_phases_keeps_the_running_count(api: API):
    """Two pods started before one flush, one ending, one restarted, one started:
    the stored count is always the count of the Running pods."""
    (workload_id,) = insert(api, [{"name": "counted", "phase": "Stopped"}])
    sessions = api.client.app.state.sessions

    def counts() -> tuple[int, int]:
        with sessions() as s:
            pods = s.get(Workload, workload_id).pods
            return s.get(Workload, workload_id).running_pods, sum(
                p.phase == "Running" for p in pods
            )

    with sessions() as s, s.begin():
        made = [
            Pod(workload_id=workload_id, name=f"pod-{i}", role="worker", index=i) for i in range(3)
        ]
        s.add_all(made)
        s.flush()
        phases.transition_pod(s, made[0], "Running")
        phases.transition_pod(s, made[1], "Running")
    assert counts() == (2, 2)
    with sessions() as s, s.begin():
        first, second, third = sorted(s.get(Workload, workload_id).pods, key=lambda p: p.name)
        phases.transition_pod(s, first, "Succeeded", exit_code=0)
        phases.restart_pod(s, second, attempt=1)
        phases.transition_pod(s, third, "Running")
        phases.transition_pod(s, third, "Running")  # already there: no change
    assert counts() == (1, 1)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?sort=gpus", "sort"),
        ("?order=sideways", "order"),
        ("?size=7", "size"),
        ("?page=0", "page"),
        ("?page=-1", "page"),
        ("?page=99999999999999999999", "page"),
        ("?status=Sleeping", "status"),
        ("?search=" + "a" * 101, "search"),
        ("?search=a%00b", "search"),
        ("?project=nope", "project"),
        ("?colour=red", "colour"),
    ],
)
def test_a_bad_query_parameter_is_named_never_a_500(api: API, query: str, field: str):
    login(api)
    page = api.client.get("/workloads" + query, headers=HTML)
    assert page.status_code == 400, page.text
    assert f"<strong>{field}</strong>:" in page.text
    live = api.client.get("/workloads/live" + query, headers=FETCH)
    assert live.status_code == 400 and field in live.json()["message"]


def test_a_researcher_sees_and_touches_only_their_projects_workloads(api: API):
    (theirs,) = insert(api, [{"name": "admins-run", "phase": "Stopped"}])
    key = researcher(api, "rita", "vision")
    (mine,) = insert(api, [{"name": "ritas-run", "project": "vision"}])
    csrf = login(api, *key)
    page = api.client.get("/workloads", headers=HTML).text
    assert names(page) == ["ritas-run"]
    assert '<option value="vision"' in page and '<option value="default"' not in page
    # Another project's name in the filter is unknown, as in the API.
    assert api.client.get("/workloads?project=default", headers=HTML).status_code == 400
    for action in ("suspend", "resume", "delete"):
        answer = api.client.post(
            f"/workloads/{theirs}/{action}",
            data={"csrf_token": csrf, "confirmed": "yes"},
            headers=HTML,
            follow_redirects=False,
        )
        assert answer.status_code == 404, (action, answer.text)
    assert phase_of(api, theirs) == "Stopped"
    assert mine


def test_actions_need_the_csrf_token_and_change_nothing_without_it(api: API):
    (stopped,) = insert(api, [{"name": "held", "phase": "Stopped"}])
    login(api)
    for data in ({}, {"csrf_token": "forged", "confirmed": "yes"}):
        answer = api.client.post(f"/workloads/{stopped}/delete", data=data, headers=HTML)
        assert answer.status_code == 403
    assert phase_of(api, stopped) == "Stopped"


def test_delete_asks_first_without_a_script_then_deletes(api: API):
    (stopped,) = insert(api, [{"name": "old-run", "phase": "Stopped"}])
    csrf = login(api)
    asked = api.client.post(
        f"/workloads/{stopped}/delete",
        data={"csrf_token": csrf, "back": "/workloads?status=Stopped"},
        headers=HTML,
    )
    assert asked.status_code == 200 and "Delete workload old-run?" in asked.text
    assert phase_of(api, stopped) == "Stopped"
    done = api.client.post(
        f"/workloads/{stopped}/delete",
        data={"csrf_token": csrf, "back": "/workloads?status=Stopped", "confirmed": "yes"},
        headers=HTML,
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"] == "/workloads?status=Stopped"
    assert phase_of(api, stopped) in ("Deleting", "Deleted")
    assert "Deleting old-run." in api.client.get("/workloads", headers=HTML).text


def test_an_action_the_phase_does_not_allow_comes_back_in_words(api: API):
    (done,) = insert(api, [{"name": "finished", "phase": "Completed"}])
    csrf = login(api)
    answer = api.client.post(
        f"/workloads/{done}/resume",
        data={"csrf_token": csrf, "back": "https://evil.example/"},
        headers=HTML,
        follow_redirects=False,
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/workloads"
    page = api.client.get("/workloads", headers=HTML).text
    assert "Could not run the workload" in page and "only a Stopped, Failed or stopping one" in page
    # Only the actions valid for its phase are offered: no Stop or Run for a Completed one.
    assert "Stop finished" not in page and "Run finished" not in page
    assert "Delete finished" in page and f"/workloads/new?copy={done}" in page


def test_live_update_is_tiny_when_nothing_changed_and_sends_only_changed_rows(api: API):
    first, second = insert(
        api, [{"name": "watched", "phase": "Stopped"}, {"name": "still", "phase": "Stopped"}]
    )
    login(api)
    page = api.client.get("/workloads?status=Stopped", headers=HTML).text
    version = re.search(r'data-version="(\w+)"', page).group(1)
    have = ".".join(re.findall(r'data-v="(\w+)"', page))
    live = f"/workloads/live?status=Stopped&version={version}&have={have}"
    same = api.client.get(live, headers=FETCH)
    assert same.status_code == 200 and same.json() == {"v": version}
    assert len(same.content) < 100
    with api.client.app.state.sessions() as s, s.begin():
        s.get(Workload, first).phase_message = "touched"  # any change moves updated_at
    # Seen within LiveCache's LIVE_TTL_S (what the page holds is shared for that long).
    body: Any = wait_until(
        lambda: (got := api.client.get(live, headers=FETCH).json()).get("order") and got,
        10,
        "the live update to see the change",
    )
    assert body["v"] != version and body["range"] == "1–2 of 2"
    assert len(body["order"]) == 2
    assert body["order"][0] in have.split(".")  # "still" (the newer) is kept as it is
    (html,) = body["rows"].values()  # only the changed row travels
    assert ">watched</a>" in html and html.lstrip().startswith("<tr")
    # A browser that has nothing gets every row.
    fresh = api.client.get("/workloads/live?status=Stopped", headers=FETCH).json()
    assert len(fresh["rows"]) == 2 and second

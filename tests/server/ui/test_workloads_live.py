"""The workloads page's live update under many viewers (issue 27, item 6): what a page
holds is read from columns and shared for LIVE_TTL_S between viewers who see the same
projects, never between viewers who see different ones; its answer is the one the page
itself would give."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ringleader.server.services import ui_live as uw
from tests.conftest import wait_until
from tests.helpers.workloads_page import insert, names, researcher
from tests.server.conftest import API
from tests.server.ui.forms import FETCH, HTML, login


def _page(api: API, query: str = "") -> tuple[str, list[str], list[str]]:
    """The page's version, its rows' versions and its workloads' names."""
    page = api.client.get(f"/workloads{query}", headers=HTML).text
    found = re.search(r'data-version="(\w+)"', page)
    assert found is not None, page[:500]
    return found.group(1), re.findall(r'data-v="(\w+)"', page), names(page)


def test_the_live_state_is_the_pages_own(api: API) -> None:
    """``live_state`` (columns alone) gives the version and row versions that the page,
    built from whole rows, shows: with pods, sorted, filtered and paged."""
    rows = [{"name": f"job-{i:02d}", "phase": ["Completed", "Failed"][i % 2]} for i in range(12)]
    rows[3]["running"] = 2  # pods count in a row's version
    insert(api, rows)
    login(api)
    for query in ("", "?status=Failed", "?sort=name&order=asc&size=10&page=2", "?search=zz"):
        version, order, _ = _page(api, query)
        live = api.client.get(
            f"/workloads/live{query}{'&' if query else '?'}version=x", headers=FETCH
        )
        body = live.json()
        assert body["v"] == version and body["order"] == order, query


def test_viewers_of_different_projects_never_share_a_page(
    api: API, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert(api, [{"name": "admins-own", "phase": "Completed"}])
    key = researcher(api, "rita", "team-r")
    insert(api, [{"name": "ritas", "phase": "Completed", "project": "team-r"}])
    reads: list[Any] = []
    real = uw.live_state
    monkeypatch.setattr(uw, "live_state", lambda *a: reads.append(a[1].name) or real(*a))
    login(api)
    admin_view = api.client.get("/workloads/live?version=x", headers=FETCH).json()
    assert len(admin_view["order"]) == 2
    login(api, *key)
    rita_view = api.client.get("/workloads/live?version=x", headers=FETCH).json()
    (html,) = rita_view["rows"].values()
    assert ">ritas</a>" in html and "admins-own" not in html  # her projects' page, not his
    assert rita_view["total"] == 1
    assert reads == ["admin", "rita"]  # each page read for its own viewers


def test_viewers_of_the_same_projects_share_one_read(
    api: API, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert(api, [{"name": f"job-{i}", "phase": "Completed"} for i in range(3)])
    reads: list[str] = []
    real = uw.live_state
    monkeypatch.setattr(uw, "live_state", lambda *a: reads.append(a[1].name) or real(*a))
    monkeypatch.setattr(uw, "LIVE_TTL_S", 3600.0)  # nothing goes stale during the test
    login(api)
    version, have, _ = _page(api)
    live = f"/workloads/live?version={version}&have={'.'.join(have)}"
    for _ in range(5):  # five polls, as five browsers would
        assert api.client.get(live, headers=FETCH).json() == {"v": version}
    assert reads == ["admin"]


def test_a_changed_row_is_sent_as_it_is_now(api: API) -> None:
    """A row that changed after the shared state was read is read again, not sent under
    a version it no longer has (the browser would ask for it at every poll)."""
    (first,) = insert(api, [{"name": "moving", "phase": "Completed"}])
    login(api)
    version, have, _ = _page(api)
    from ringleader.server.models import Workload

    with api.client.app.state.sessions() as s, s.begin():
        s.get(Workload, first).phase_message = "moved"
    body: Any = wait_until(
        lambda: (got := api.client.get(
            f"/workloads/live?version={version}&have={have[0]}", headers=FETCH
        ).json()).get("order") and got,
        10,
        "the change",
    )  # fmt: skip
    (row_version,) = body["order"]
    assert list(body["rows"]) == [row_version]
    assert f'data-v="{row_version}"' in body["rows"][row_version]


def test_a_rows_html_is_built_once_and_sent_with_each_sessions_own_token(
    api: API, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert(api, [{"name": "shared", "phase": "Stopped"}])  # Stopped: a Run form, a token
    from ringleader.server.ui import workloads_page

    built: list[str] = []
    real = workloads_page.fragment
    monkeypatch.setattr(
        workloads_page, "fragment", lambda *a, **kw: built.append(a[0]) or real(*a, **kw)
    )
    tokens, rows = [], []
    for _ in range(2):  # two browsers, two sessions
        login(api)
        page = api.client.get("/workloads", headers=HTML).text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert token is not None
        tokens.append(token.group(1))
        (html,) = api.client.get("/workloads/live?version=x", headers=FETCH).json()["rows"].values()
        rows.append(html)
    assert tokens[0] != tokens[1]
    for own, other, html in ((tokens[0], tokens[1], rows[0]), (tokens[1], tokens[0], rows[1])):
        assert f'value="{own}"' in html and other not in html
        assert uw.CSRF_MARK not in html
    assert built == ["workloads_row.html"]  # the second viewer's row came built

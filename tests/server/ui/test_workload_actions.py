"""Stop, Run and Delete from the table and the workload page (ui/workload_actions.py):
what a stale page gets, where an action returns, and how a failure reads in the table."""

from __future__ import annotations

import re

from tests.conftest import wait_until
from tests.server.conftest import API
from tests.server.ui.forms import HTML, login


def test_an_action_on_a_workload_deleted_meanwhile_says_so_and_does_nothing(api: API):
    wid = api.submit("gone", "python -c pass").json()["workloadId"]
    token = login(api)
    assert api.delete(f"/api/v1/workloads/distributed/{wid}").status_code == 202
    wait_until(lambda: api.get(f"/api/v1/workloads/{wid}").status_code == 404, 60, "deleted")
    stale = api.client.post(
        f"/workloads/{wid}/suspend",
        data={"csrf_token": token, "back": "/workloads"},
        headers=HTML,
        follow_redirects=False,
    )
    assert stale.status_code == 404
    assert "no longer exists" in stale.text and 'href="/workloads"' in stale.text


def test_a_failed_workload_shows_its_first_line_in_the_table_and_stop_asks_first(api: API):
    failing = "python -c 'import sys; print(1); sys.exit(3)'"
    wid = api.submit("broken", failing, backoffLimit=0).json()["workloadId"]
    api.wait_phase(wid, {"Failed"})
    message = api.get(f"/api/v1/workloads/{wid}").json()["phaseMessage"]
    assert "\n" in message  # the summary, then the root cause's lines
    login(api)
    table = api.client.get("/workloads", headers=HTML).text
    reason = re.search(r'<span class="reason" title="([^"]*)">', table)
    assert reason, table
    assert reason.group(1) == message.split("\n", 1)[0]  # e.g. "rank 1 on ...: exit code 3"
    assert "Root Cause" not in table
    sleeper = api.submit("sleeper", "python -c 'import time; time.sleep(600)'")
    api.wait_phase(sleeper.json()["workloadId"], {"Running"})
    table = api.client.get("/workloads", headers=HTML).text
    assert 'data-confirm="Stop sleeper?' in table

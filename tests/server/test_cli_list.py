"""``ringleader list`` against a real server: the newest --limit workloads, and a note
on stderr (never in the table or in -o json) when more are not shown (issue 27, item 2:
a project of 100,000 workloads lists in a fraction of a second, and says so)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.server.conftest import ServerProcess


def test_list_shows_the_newest_limit_and_says_how_many_more(
    server: ServerProcess, tmp_path: Path
) -> None:
    for name in ("first", "second", "third"):
        server.submit_dist(name, tmp_path, command="true")
    done = server.cli("list", "--limit", "2")
    assert done.returncode == 0, done.stderr
    assert "third" in done.stdout and "second" in done.stdout
    assert "first" not in done.stdout  # the oldest is the one left out
    assert "the newest 2 of 3 workloads; --limit 3 shows more" in done.stderr
    whole = server.cli("list")
    assert whole.returncode == 0 and "first" in whole.stdout
    assert whole.stderr == ""  # all shown: nothing to say
    data = server.cli("list", "--limit", "1", "-o", "json")
    assert data.returncode == 0 and data.stderr == ""  # a script reads total from the JSON
    parsed = json.loads(data.stdout)
    assert parsed["total"] == 3 and [w["name"] for w in parsed["workloads"]] == ["third"]


def test_a_limit_past_a_page_is_refused_naming_the_flag(server: ServerProcess) -> None:
    for bad in ("0", "501", "many"):
        done = server.cli("list", "--limit", bad)
        assert done.returncode == 2, (bad, done.stdout)
        assert "--limit" in done.stderr and "Traceback" not in done.stderr

"""Issue 22, H4's pieces on their own: the JSON shape bound, the capped 422, log
rotation and its readers, the rotation note (tests/server/security/test_bounded_work.py
performs the attacks against a real server)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ringleader.launch.detached import LaunchFile
from ringleader.launch.plan import LaunchSpec
from ringleader.launch.run_logs import FROM_MARK, RotatingLog, format_log_line, read_logs
from ringleader.server.backends.local.logtail import tail_logs
from ringleader.server.backends.local.planning import LocalPod
from ringleader.server.backends.local.status import rotation_note
from ringleader.server.limits import (
    MAX_JSON_DEPTH,
    MAX_JSON_KEYS,
    MAX_JSON_VALUES,
    counted_keys,
    json_problem,
)
from ringleader.server.validation import MAX_ERRORS, validation_content


def test_the_json_shape_bound_names_where_a_body_is_too_big() -> None:
    assert json_problem(b'{"spec": {"command": "x", "env": [1, 2]}}') is None
    assert json_problem(b"not json") is None  # FastAPI's own 422 says where
    many = {f"k{i}": 1 for i in range(MAX_JSON_KEYS + 1)}
    where, problem = json_problem(json.dumps({"spec": {"inner": many}}).encode()) or ([], "")
    assert where == ["spec", "inner"] and f"at most {MAX_JSON_KEYS} keys" in problem
    values = json.dumps({"list": list(range(MAX_JSON_VALUES + 1))}).encode()
    assert "values" in (json_problem(values) or ([], ""))[1]
    deep = b"[" * (MAX_JSON_DEPTH + 2) + b"]" * (MAX_JSON_DEPTH + 2)
    assert "nested deeper" in (json_problem(deep) or ([], ""))[1]
    very_deep = b"[" * 100_000 + b"]" * 100_000  # past the parser's own recursion limit
    assert "nested deeper" in (json_problem(very_deep) or ([], ""))[1]


def test_a_422_lists_the_first_errors_with_small_echoes() -> None:
    big = {f"k{i}": "v" * 10_000 for i in range(500)}
    errors = [
        {"type": "extra_forbidden", "loc": ("body", "spec", f"x{i}"), "msg": "no", "input": big}
        for i in range(5_000)
    ]
    content = validation_content(errors, b"{}")
    assert len(content["detail"]) == MAX_ERRORS and "5000 errors" in content["message"]
    assert len(json.dumps(content)) < 100_000
    echoed = content["detail"][0]["input"]
    assert len(echoed) == 11 and echoed["..."] == "490 more keys"  # ten, and how many more
    secret = [{"type": "x", "loc": ("body",), "msg": "m", "input": {"clientSecret": "s3"}}]
    assert "s3" not in json.dumps(validation_content(secret, b"{}"))


def write_lines(path: Path, count: int, cap: int) -> int:
    log = RotatingLog(path, cap)
    rotations = sum(log.write(format_log_line(1000.0 + i, f"line {i}")) for i in range(count))
    log.close()
    return rotations


def test_a_log_is_rotated_past_its_cap_and_read_back_with_its_place(tmp_path: Path) -> None:
    folder = tmp_path / "logs" / "attempt-0"
    folder.mkdir(parents=True)
    rotations = write_lines(folder / "rank-0.stdout", 1_000, 4096)
    assert rotations > 1
    sizes = [p.stat().st_size for p in folder.iterdir()]
    assert sorted(p.name for p in folder.iterdir()) == ["rank-0.stdout", "rank-0.stdout.1"]
    assert all(size <= 4096 for size in sizes)
    records = list(read_logs(tmp_path / "logs"))
    skipped = sum(r.skipped for r in records)
    lines = [r.text for r in records if not r.skipped]
    assert lines[-1] == "line 999" and skipped + len(lines) == 1_000  # the place is kept
    assert lines == [f"line {i}" for i in range(skipped, 1_000)]
    assert not any(text.startswith(FROM_MARK) for text in lines)


def test_a_tail_reads_the_rotated_file_when_the_new_one_is_short(tmp_path: Path) -> None:
    run = tmp_path / "run"
    folder = run / "logs" / "attempt-0"
    folder.mkdir(parents=True)
    launch = LaunchFile(spec=LaunchSpec([], [], "run", "", ""))
    (run / "launch.json").write_text(json.dumps(launch.to_json()))
    write_lines(folder / "rank-0.stdout", 1_000, 4096)
    current = (folder / "rank-0.stdout").read_text().count("\n") - 1  # less its mark
    tail = [line.text for line in tail_logs(str(run), None, current + 5)]
    assert tail[-1] == "line 999" and len(tail) == current + 5
    assert not any(text.startswith(FROM_MARK) for text in tail)


def test_the_status_names_the_pods_whose_logs_were_rotated() -> None:
    pods = [LocalPod(name="w-master-0", role="master", index=0, ranks=(0,), node="")]
    state = {"logs_rotated": {"attempt-0/rank-0.stdout": {"rank": 0, "stream": "stdout",
                                                          "max_bytes": 65536}}}  # fmt: skip
    note = rotation_note(state, pods)
    assert "w-master-0 stdout" in note and "65536 bytes" in note and "--max-log-bytes" in note
    assert rotation_note({}, pods) == ""


def test_a_failing_body_is_refused_before_fastapi_validates_it(tmp_path: Path) -> None:
    """The off-loop check refuses the body: FastAPI's own (on-loop) validation never
    runs for it, and the 422 names the fields as FastAPI's would."""
    from unittest import mock

    from fastapi.testclient import TestClient

    from ringleader.server import validation
    from ringleader.server.app import create_app
    from ringleader.server.config import ServerConfig

    app = create_app(ServerConfig(data_dir=tmp_path, background=False, run_as="server"))
    body = {"grantType": "client_credentials", **{f"k{i}": i for i in range(500)}}
    checked = mock.Mock(wraps=validation._errors)
    with (
        TestClient(app) as client,
        mock.patch.object(validation, "_errors", checked),
        mock.patch("fastapi.dependencies.utils.request_body_to_args") as fastapis,
    ):
        answer = client.post("/api/v1/token", json=body)
    assert answer.status_code == 422 and checked.call_count == 1 and not fastapis.called
    assert [e["loc"] for e in answer.json()["detail"]] == [
        ["body", "clientID"],
        ["body", "clientSecret"],
    ]


def test_a_caller_who_may_not_call_a_route_hears_401_not_what_its_body_got_wrong(
    tmp_path: Path,
) -> None:
    """The off-loop check asks for the caller first where the route does: a stranger's
    bad body is a 401, as it was before bodies were checked off the loop."""
    from fastapi.testclient import TestClient

    from ringleader.server.app import create_app
    from ringleader.server.config import ServerConfig

    app = create_app(ServerConfig(data_dir=tmp_path, background=False, run_as="server"))
    with TestClient(app) as client:
        for headers in ({}, {"Authorization": "Bearer forged"}):
            answer = client.post("/api/v1/access-keys", json={"name": "k"}, headers=headers)
            assert answer.status_code == 401, answer.text
            assert "detail" not in answer.json()  # nothing about the body


def test_a_raw_body_is_never_echoed_in_a_422(tmp_path: Path) -> None:
    """Without a JSON content type FastAPI validates the raw bytes: the 422 says how
    many there were, never what they were (they may hold a secret)."""
    from fastapi.testclient import TestClient

    from ringleader.server.app import create_app
    from ringleader.server.config import ServerConfig

    app = create_app(ServerConfig(data_dir=tmp_path, background=False, run_as="server"))
    raw = b'{"grantType": "client_credentials", "clientID": "x", "clientSecret": "s3cret-42"}'
    with TestClient(app) as client:
        answer = client.post("/api/v1/token", content=raw, headers={"Content-Type": ""})
    assert answer.status_code == 422, answer.text
    assert "s3cret-42" not in answer.text and f"<{len(raw)} bytes" in answer.text, answer.text


_TRICKY = st.text() | st.text(alphabet=st.sampled_from('":\\ ,{[]}\n\ta'), max_size=8)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TRICKY, inner, max_size=4),
    max_leaves=30,
)


def _keys(value: object) -> int:
    if isinstance(value, dict):
        return len(value) + sum(_keys(v) for v in value.values())
    if isinstance(value, list):
        return sum(_keys(v) for v in value)
    return 0


@settings(max_examples=1000, deadline=None)
@given(_JSON, st.booleans())
def test_keys_counted_in_a_bodys_bytes_are_never_more_than_it_has(
    value: object, compact: bool
) -> None:
    """The byte count refuses a body before parsing it, so it must never count a key
    the body does not have: strings full of quotes, colons and backslashes included."""
    separators = (",", ":") if compact else (", ", ": ")
    for ascii_only in (True, False):
        body = json.dumps(value, separators=separators, ensure_ascii=ascii_only).encode()
        assert counted_keys(body) <= _keys(value)
    assert counted_keys(json.dumps({f"k{i}": i for i in range(50)}).encode()) == 50


def test_a_big_body_is_checked_in_the_checker_process_and_refused_naming_where(
    tmp_path: Path,
) -> None:
    """A body over ``IN_PROCESS_BODY_BYTES`` is counted and parsed in the body checker
    (another process: its parsing never holds the server's interpreter lock); what it
    finds is the same 422 naming where, and a body within the bounds goes on to the
    route as before."""
    import os

    from fastapi.testclient import TestClient

    from ringleader.server import limits
    from ringleader.server.app import create_app
    from ringleader.server.config import ServerConfig

    app = create_app(ServerConfig(data_dir=tmp_path, background=False, run_as="server"))
    padding = "p" * limits.IN_PROCESS_BODY_BYTES
    wide = {f"k{i}": i for i in range(MAX_JSON_KEYS + 1)}  # too many keys in one object
    many = {f"k{i}": i for i in range(MAX_JSON_VALUES + 1)}  # counted from the bytes alone
    # A token (here a wrong one): without any, a body this big is refused unread (401).
    with TestClient(app, headers={"Authorization": "Bearer not-a-token"}) as client:
        limits.CHECKER.close()
        url = "/api/v1/workloads/distributed"
        answer = client.post(url, json={"spec": {"inner": wide, "pad": padding}})
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"][0]["loc"] == ["body", "spec", "inner"]
        assert limits.CHECKER.pid not in (None, os.getpid())
        answer = client.post(url, json={"spec": many, "pad": padding})
        assert answer.status_code == 422 and "keys or more" in answer.json()["message"]
        # Within the bounds: the route's own answer (a wrong token), not the checker's.
        answer = client.post(url, json={"name": "ok", "pad": padding})
        assert answer.status_code == 401, answer.text
    assert limits.CHECKER.pid is None  # the server's end ended it

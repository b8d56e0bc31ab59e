"""Issue 12 item 4: no input stalls the server or gives a 500.

Every refusal is a 4xx naming the field, and nothing is stored; the list of
workloads answers 200 afterwards.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ringleader import shellwords
from ringleader.server.limits import BodyLimit
from ringleader.shellwords import split_command
from ringleader.spec_limits import (
    MAX_COMMAND_CHARS,
    MAX_ENV_VALUE_CHARS,
    MAX_ENV_VARS,
    RESERVED_ENV,
    RESERVED_ENV_PREFIXES,
)
from tests.server.conftest import API
from tests.server.quiet import quiet_api

LIMITS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "users.md"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[API]:
    yield from quiet_api(tmp_path, max_body_bytes=1024 * 1024, raise_server_exceptions=True)


def body(api: API, name: str = "w", **spec: Any) -> dict[str, Any]:
    return {
        "name": name,
        "projectId": api.project_id(),
        "spec": {"command": "python train.py", "numWorkers": 1, **spec},
    }


def post_raw(api: API, raw: bytes) -> Any:
    return api.post(
        "/api/v1/workloads/distributed",
        content=raw,
        headers={"Content-Type": "application/json"},
    )


def refused(response: Any, status: int, field: str) -> None:
    """A ``status`` answer naming ``field`` (a 422's ``loc`` ends with its parts)."""
    assert response.status_code == status, response.text
    if status == 422:
        locs = [".".join(map(str, d["loc"])) for d in response.json()["detail"]]
        assert any(loc.endswith(field) for loc in locs), (field, locs)


def nothing_stored(api: API) -> None:
    listed = api.get("/api/v1/workloads")
    assert listed.status_code == 200, listed.text
    assert listed.json()["total"] == 0


# ----- 1. the request body's size -------------------------------------------------------


def test_a_body_over_the_limit_is_413_and_nothing_is_stored(api: API) -> None:
    big = body(api, environmentVariables=[{"name": "X", "value": "v" * 2_000_000}])
    answer = api.post("/api/v1/workloads/distributed", json=big)
    assert answer.status_code == 413
    assert "--max-body-bytes" in answer.json()["message"]
    nothing_stored(api)


def run_asgi(
    limit: int, chunks: list[bytes], headers: list[tuple[bytes, bytes]], cookie: str = ""
) -> Any:
    """``BodyLimit`` around an app that reads the body; what was sent back, what the
    app saw, and how many body messages were read."""
    seen: list[bytes] = []
    sent: list[dict[str, Any]] = []
    reads = 0

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        seen.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        if reads > len(chunks):
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunks[reads - 1], "more_body": reads < len(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    asyncio.run(BodyLimit(app, max_bytes=limit, session_cookie=cookie)(scope, receive, send))
    return sent, seen, reads


def test_the_limit_counts_streamed_bytes_not_the_declared_length() -> None:
    # Chunked (no Content-Length): stopped at the first chunk past the limit, unread after.
    sent, seen, reads = run_asgi(1000, [b"x" * 400] * 100, [])
    assert sent[0]["status"] == 413 and seen == [] and reads == 3
    # Declared too large: refused before a byte is read.
    sent, seen, reads = run_asgi(1000, [b"x"], [(b"content-length", b"5000")])
    assert sent[0]["status"] == 413 and reads == 0
    # Within the limit: the app gets the whole body in one message.
    sent, seen, reads = run_asgi(1000, [b"a" * 500, b"b" * 500], [])
    assert sent[0]["status"] == 200 and seen == [b"a" * 500 + b"b" * 500]


def test_a_request_without_any_credential_sends_no_more_than_a_login_takes() -> None:
    """No token and no session cookie: every route but the token exchange and the
    login answers 401 anyway, so more than ``SMALL_BODY_BYTES`` is a 401 unread."""
    from ringleader.server.limits import SMALL_BODY_BYTES

    big = [b"x" * 400] * 100  # 40 KB, chunked
    sent, seen, reads = run_asgi(1 << 22, big, [])
    assert sent[0]["status"] == 401 and seen == [] and reads == SMALL_BODY_BYTES // 400 + 1
    assert b"carries no token" in sent[1]["body"]
    sent, seen, reads = run_asgi(1 << 22, big, [(b"content-length", b"40000")])
    assert sent[0]["status"] == 401 and reads == 0  # refused on its declared size
    for credential in ((b"authorization", b"Bearer whatever"), (b"cookie", b"a=1; rl_s=2")):
        sent, seen, reads = run_asgi(1 << 22, big, [credential], cookie="rl_s")
        assert sent[0]["status"] == 200 and seen == [b"".join(big)]  # the route decides
    sent, seen, reads = run_asgi(1 << 22, big, [(b"cookie", b"other=1")], cookie="rl_s")
    assert sent[0]["status"] == 401


def test_a_strangers_big_body_to_the_api_is_a_401_naming_the_way_in(api: API) -> None:
    answer = api.client.post("/api/v1/workloads/distributed", content=b"{" + b" " * 100_000)
    assert answer.status_code == 401 and "ringleader token" in answer.json()["message"]
    nothing_stored(api)


# ----- 2. fields: sizes, storable text, commands that split, variables -----------------


def test_a_megabyte_command_is_refused_at_once_naming_the_field(api: API) -> None:
    answer = api.post("/api/v1/workloads/distributed", json=body(api, command="a" * 1_000_000))
    refused(answer, 422, "spec.command")
    answer = api.post(
        "/api/v1/workloads/distributed", json=body(api, args="a" * (MAX_COMMAND_CHARS + 1))
    )
    refused(answer, 422, "spec.args")
    nothing_stored(api)


def test_a_command_longer_than_an_exec_can_take_is_refused_with_the_bound(api: API) -> None:
    """A 200 KB command was once accepted, then failed every restart with E2BIG; the bound
    keeps one argument well under Linux's MAX_ARG_STRLEN (128 KiB), and says so."""
    assert MAX_COMMAND_CHARS * 4 <= 128 * 1024  # even all-4-byte UTF-8 fits one argument
    answer = api.post("/api/v1/workloads/distributed", json=body(api, command="a" * 200_000))
    refused(answer, 422, "spec.command")
    assert f"at most {MAX_COMMAND_CHARS} characters" in answer.text
    nothing_stored(api)
    fits = "python -c " + shlex.quote("x" * (MAX_COMMAND_CHARS - 20))
    assert api.post("/api/v1/workloads/distributed", json=body(api, command=fits)).status_code in (
        200,
        201,
        202,
    )


@pytest.mark.parametrize("command", ["python -c 'print(1)", 'echo "unclosed', "trailing \\"])
def test_a_command_that_cannot_be_split_is_422_not_500(api: API, command: str) -> None:
    answer = api.post("/api/v1/workloads/distributed", json=body(api, command=command))
    refused(answer, 422, "spec.command")
    answer = api.post("/api/v1/workloads/distributed", json=body(api, args=command))
    refused(answer, 422, "spec.args")
    nothing_stored(api)


def test_a_body_that_is_no_json_names_its_line_and_column(api: API) -> None:
    """What a user gets pasting seed 002's curl snippet with its stray backslashes."""
    raw = b'{\n  "name": "w",\n  "spec": {"numWorkers": 2, \\\n "command": "true"}\n}'
    answer = post_raw(api, raw)
    assert answer.status_code == 422, answer.text
    assert answer.json()["message"].startswith(
        "the request body is not valid JSON: line 3, column 29:"
    ), answer.json()
    nothing_stored(api)


@pytest.mark.parametrize("text", ["\\ud800", "a\\udfffb", "\\u0000"])
@pytest.mark.parametrize(
    "where",
    ["command", "args", "image", "workingDir", "env value", "priorityClass", "projectId"],
)
def test_a_lone_surrogate_or_nul_anywhere_is_422_and_the_list_still_answers(
    api: API, text: str, where: str
) -> None:
    project = api.project_id()
    fields = {
        "command": f'"spec": {{"numWorkers": 1, "command": "echo {text}"}}',
        "args": f'"spec": {{"numWorkers": 1, "command": "echo", "args": "{text}"}}',
        "image": f'"spec": {{"numWorkers": 1, "command": "echo", "image": "i{text}"}}',
        "workingDir": f'"spec": {{"numWorkers": 1, "command": "echo", "workingDir": "/{text}"}}',
        "env value": '"spec": {"numWorkers": 1, "command": "echo", "environmentVariables":'
        f' [{{"name": "A", "value": "{text}"}}]}}',
        "priorityClass": f'"spec": {{"numWorkers": 1, "command": "e", "priorityClass": "{text}"}}',
        "projectId": '"spec": {"numWorkers": 1, "command": "echo"}',
    }
    project_id = f"{project}{text}" if where == "projectId" else project
    raw = f'{{"name": "w", "projectId": "{project_id}", {fields[where]}}}'.encode()
    answer = post_raw(api, raw)
    if where == "projectId" and text == "\\u0000":
        assert answer.status_code == 404, answer.text  # no project has that id
    else:
        field = {"env value": "environmentVariables.0.value"}
        refused(answer, 422, field.get(where, where))
    nothing_stored(api)


@pytest.mark.parametrize("name", ["A=B", "A\u0000", "1ABC", "A B", "É", ""])
def test_an_env_name_that_is_no_variable_name_is_422(api: API, name: str) -> None:
    variables = [{"name": name, "value": "x"}]
    answer = api.post(
        "/api/v1/workloads/distributed", json=body(api, environmentVariables=variables)
    )
    refused(answer, 422, "spec.environmentVariables.0.name")
    nothing_stored(api)


@pytest.mark.parametrize(
    "name",
    [
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "NODE_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "RINGLEADER_JOB_ID",
        "TORCHELASTIC_RUN_ID",
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "CUDA_VISIBLE_DEVICES",
    ],
)
def test_a_variable_ringleader_sets_cannot_be_set_by_the_spec(api: API, name: str) -> None:
    variables = [{"name": "FINE", "value": "1"}, {"name": name, "value": "0"}]
    answer = api.post(
        "/api/v1/workloads/distributed", json=body(api, environmentVariables=variables)
    )
    refused(answer, 422, "spec.environmentVariables.1.name")
    assert name in answer.json()["detail"][0]["msg"]
    nothing_stored(api)


def test_ordinary_variables_are_still_taken(api: API) -> None:
    variables = [
        {"name": "OMP_NUM_THREADS", "value": "2"},
        {"name": "OMPI_MCA_btl", "value": "self,tcp"},
        {"name": "_PRIVATE2", "value": "x" * MAX_ENV_VALUE_CHARS},
    ]
    answer = api.post(
        "/api/v1/workloads/distributed", json=body(api, environmentVariables=variables)
    )
    assert answer.status_code == 202, answer.text


def test_sizes_of_variables_are_bounded(api: API) -> None:
    one_too_long = [{"name": "A", "value": "x" * (MAX_ENV_VALUE_CHARS + 1)}]
    answer = api.post(
        "/api/v1/workloads/distributed", json=body(api, environmentVariables=one_too_long)
    )
    refused(answer, 422, "spec.environmentVariables.0.value")
    too_many = [{"name": f"V{i}", "value": ""} for i in range(MAX_ENV_VARS + 1)]
    answer = api.post(
        "/api/v1/workloads/distributed", json=body(api, environmentVariables=too_many)
    )
    refused(answer, 422, "spec.environmentVariables")
    nothing_stored(api)


def test_the_reserved_variables_are_documented_from_the_same_list() -> None:
    limits = LIMITS_PAGE.read_text().split("## Limits", 1)[1].split("\n## ", 1)[0]
    for name in (*RESERVED_ENV, *(p + "*" for p in RESERVED_ENV_PREFIXES)):
        assert f"`{name}`" in limits, name


# ----- the command's split: shlex's answers, in linear time ------------------------------


def test_split_command_answers_as_shlex_split_does() -> None:
    rng = random.Random(12)
    alphabet = ["a", "b", " ", "\t", "\n", "\r", "'", '"', "\\", "\x00", "é", "\x0b", "#", "$"]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        try:
            expected: list[str] | str = shlex.split(text)
        except ValueError:
            expected = "refused"
        try:
            got: list[str] | str = split_command(text)
        except ValueError:
            got = "refused"
        assert got == expected, repr(text)


class CountingPattern:
    """``spec._SEGMENT`` counting its matches and the characters they consume."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.matches = 0
        self.consumed = 0

    def match(self, text: str, pos: int) -> re.Match[str] | None:
        found = self.pattern.match(text, pos)
        self.matches += 1
        if found is not None:
            self.consumed += found.end() - found.start()
        return found


@pytest.mark.parametrize(
    "unit",
    ["a", '"a', "'a", "a ", "\\a", "'x' ", '"\\"" ', "a'b'\"c\"\\ "],
    ids=["word", "double", "single", "words", "escapes", "quoted-words", "dq-escape", "mixed"],
)
def test_split_command_is_linear_in_its_input(monkeypatch: pytest.MonkeyPatch, unit: str) -> None:
    """Each character is consumed by exactly one match of a pattern with only
    possessive quantifiers (no backtracking), and there are at most as many matches
    as characters: the work grows with the input, never with its square (shlex.split
    copies a word at each of its characters)."""
    segment = shellwords._SEGMENT
    for n in (1_000, 100_000):
        counting = CountingPattern(segment)
        monkeypatch.setattr(shellwords, "_SEGMENT", counting)
        text = unit * n
        if text.count('"') % 2 or text.count("'") % 2:
            text = unit[0] + "a" * n + unit[0]  # one long quoted word
        split_command(text)
        assert counting.consumed == len(text)
        assert counting.matches <= len(text)
    pattern = segment.pattern  # every quantifier possessive: none backtracks
    assert "*" not in pattern.replace("*+", "") and "+" not in pattern.replace("++", "").replace(
        "*+", ""
    )


# ----- 3. nodes: option injection and odd characters -------------------------------------


@pytest.mark.parametrize(
    "ssh",
    [
        "-oProxyCommand",
        "-oProxyCommand=evil",
        "user@-x",
        "-l@host",
        "a b",
        "host\n",
        "h\tx",
        "h\x00",
    ],
)
def test_an_ssh_target_that_ssh_would_read_as_an_option_is_422(api: API, ssh: str) -> None:
    answer = api.post("/api/v1/nodes", json={"ssh": ssh})
    refused(answer, 422, "ssh")
    assert api.client.app.state.probed == []  # never handed to ssh
    nodes = api.get("/api/v1/nodes")
    assert nodes.status_code == 200 and all(n["kind"] != "ssh" for n in nodes.json())


def test_a_plain_ssh_target_is_still_registered(api: API) -> None:
    answer = api.post("/api/v1/nodes", json={"ssh": "me@gpu-1.lab", "labels": {"rack": "a"}})
    assert answer.status_code == 201, answer.text
    assert api.client.app.state.probed == ["me@gpu-1.lab"]


def test_node_labels_are_bounded_and_storable(api: API) -> None:
    raw = b'{"ssh": "gpu1", "labels": {"k": "\\ud800"}}'
    answer = api.post("/api/v1/nodes", content=raw, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    answer = api.post("/api/v1/nodes", json={"ssh": "gpu1", "labels": {"k": "v" * 10_000}})
    refused(answer, 422, "labels.k")


# ----- 5. lists carry summaries ---------------------------------------------------------


def test_a_list_carries_summaries_and_describe_the_whole_spec(api: API) -> None:
    variables = [{"name": "SECRETISH", "value": "v" * 30_000}]
    submitted = api.post(
        "/api/v1/workloads/distributed",
        json=body(api, command="python " + "x" * 30_000, environmentVariables=variables),
    )
    assert submitted.status_code == 202, submitted.text
    wid = submitted.json()["workloadId"]
    listed = api.get("/api/v1/workloads")
    assert listed.status_code == 200 and listed.json()["view"] == "summary"
    item = listed.json()["workloads"][0]
    assert len(listed.content) < 4_000  # not the 60 kB the spec takes
    assert "command" not in item["spec"]["spec"]
    assert "environmentVariables" not in item["spec"]["spec"]
    assert item["spec"]["spec"]["environmentVariableCount"] == 1
    assert item["spec"]["spec"]["numWorkers"] == 1 and item["requestedPods"] == 2
    full = api.get("/api/v1/workloads", params={"view": "full"}).json()["workloads"][0]
    assert full["spec"]["spec"]["environmentVariables"] == variables
    one = api.get(f"/api/v1/workloads/{wid}").json()
    assert one["spec"]["spec"]["command"].startswith("python xxx")
    assert api.get("/api/v1/workloads", params={"view": "bogus"}).status_code == 422


def test_summary_keeps_every_other_field() -> None:
    from ringleader.server.services.views import spec_summary

    stored = json.loads(
        '{"name": "w", "projectId": "p", "spec": {"command": "c", "args": "a", "image": "i",'
        ' "numWorkers": 2, "compute": {"gpuDevicesRequest": 1}},'
        ' "masterSpec": {"command": "m", "workingDir": "/w"}}'
    )
    assert spec_summary(stored) == {
        "name": "w",
        "projectId": "p",
        "spec": {"image": "i", "numWorkers": 2, "compute": {"gpuDevicesRequest": 1}},
        "masterSpec": {"workingDir": "/w"},
    }


def test_a_row_stored_before_the_bounds_is_still_listed_and_shown(api: API) -> None:
    """The bounds guard input; a spec already stored that breaks them is read back as is."""
    from ringleader.server.models import Workload

    old = {
        "name": "old",
        "projectId": api.project_id(),
        "spec": {
            "command": "python " + "x" * (MAX_COMMAND_CHARS + 10),
            "args": "'unbalanced \ud800",  # as the server took it (202)
            "numWorkers": 1,
            "environmentVariables": [{"name": "MASTER_PORT", "value": "v\x00" * 40_000}],
            "nodePools": [f"p{i}" for i in range(100)],
        },
    }
    with api.client.app.state.sessions() as s, s.begin():
        s.add(Workload(name="old", project_id=old["projectId"], spec=old, spec_version=1,
                       framework="PyTorch", desired_phase="Running", phase="Pending"))  # fmt: skip
    listed = api.get("/api/v1/workloads")
    assert listed.status_code == 200 and listed.json()["total"] == 1
    wid = listed.json()["workloads"][0]["workloadId"]
    shown = api.get(f"/api/v1/workloads/{wid}")
    assert shown.status_code == 200
    assert shown.json()["spec"]["spec"]["environmentVariables"][0]["name"] == "MASTER_PORT"
    assert shown.json()["spec"]["spec"]["args"] == "'unbalanced \ud800"  # JSON's escape
    full = api.get("/api/v1/workloads", params={"view": "full"})
    assert full.status_code == 200

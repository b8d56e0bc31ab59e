"""A submission sent again is the first one (``Idempotency-Key``): on both databases, a
retry answers with the first workload and makes none; another body with the key is a 422
naming the header; keys are each user's own; racing retries make one row; and the
client resends a submission whose answer was lost with the same key, so the workload
exists exactly once (a real server, a real connection cut after the request)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from ringleader.client import Client
from ringleader.spec import WorkloadSpec
from tests.server.conftest import API, running_server

PATH = "/api/v1/workloads/distributed"


def _body(api: API, name: str = "w", command: str = "python train.py") -> dict[str, Any]:
    return {
        "name": name,
        "projectId": api.project_id(),
        "spec": {"command": command, "numWorkers": 1},
    }


def _post(api: API, body: dict[str, Any], key: str | None, **headers: str) -> httpx.Response:
    if key is not None:
        headers["Idempotency-Key"] = key
    return api.post(PATH, json=body, headers=headers)


def _names(api: API) -> list[str]:
    listed = api.get("/api/v1/workloads").json()
    return sorted(w["name"] for w in listed["workloads"])


def test_a_retry_with_the_key_answers_as_the_first_and_makes_nothing(api: API) -> None:
    first = _post(api, _body(api), "k-1")
    again = _post(api, _body(api), "k-1")
    assert first.status_code == again.status_code == 202, (first.text, again.text)
    assert again.json()["workloadId"] == first.json()["workloadId"]
    assert _names(api) == ["w"]
    # Without a key the same body is a new submission: the taken name's 409, as ever.
    assert _post(api, _body(api), None).status_code == 409


def test_the_key_with_another_body_is_refused_naming_the_header(api: API) -> None:
    assert _post(api, _body(api), "k-2").status_code == 202
    other = _post(api, _body(api, name="v", command="python other.py"), "k-2")
    assert other.status_code == 422, other.text
    assert "Idempotency-Key" in other.text and "another submission" in other.text
    assert _names(api) == ["w"]


def test_keys_are_each_users_own(api: API) -> None:
    project = api.project_id()
    bob = api.new_user("bob")
    joined = api.put(
        f"/api/v1/org-unit/projects/{project}/members/bob", json={"role": "researcher"}
    )
    assert joined.status_code == 200, joined.text
    assert _post(api, _body(api, "mine"), "shared").status_code == 202
    theirs = api.post(PATH, json=_body(api, "theirs"), headers={**bob, "Idempotency-Key": "shared"})
    assert theirs.status_code == 202, theirs.text
    assert _names(api) == ["mine", "theirs"]


@pytest.mark.parametrize("key", ["", "has space", "x" * 201, "caf\u00e9"])
def test_a_bad_key_is_a_422_naming_the_header_and_nothing_is_stored(api: API, key: str) -> None:
    answer = api.post(PATH, json=_body(api), headers={"Idempotency-Key": key.encode()})
    assert answer.status_code == 422, answer.text
    assert "Idempotency-Key" in answer.text
    assert _names(api) == []


def test_racing_retries_make_one_workload(api: API) -> None:
    body = _body(api, "raced")
    start = threading.Barrier(8)

    def send(_: int) -> httpx.Response:
        start.wait()
        return _post(api, body, "k-race")

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, range(8)))
    assert {a.status_code for a in answers} == {202}, [a.text for a in answers]
    assert len({a.json()["workloadId"] for a in answers}) == 1
    assert _names(api) == ["raced"]


class _AnswerLost(httpx.BaseTransport):
    """Sends every request for real; the first POST's answer never reaches the caller."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.posts: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST" and request.url.path == PATH:
            self.posts.append(request.headers.get("Idempotency-Key"))
            if len(self.posts) == 1:
                response.read()
                raise httpx.ReadError("connection reset by peer", request=request)
        return response


def test_the_client_resends_a_submission_whose_answer_was_lost(tmp_path: Path) -> None:
    with running_server(tmp_path / "home") as server:
        client = Client.connect(home=server.home)
        lossy = _AnswerLost()
        client.http = httpx.Client(base_url=client.url, transport=lossy, timeout=30)
        spec = WorkloadSpec.model_validate(
            {
                "name": "lost",
                "spec": {"command": "sleep 60", "numWorkers": 1},
                "projectId": "default",
            }
        )
        accepted = client.submit_distributed(spec)
        assert len(lossy.posts) == 2 and lossy.posts[0] == lossy.posts[1] is not None
        listed = client.list_workloads().workloads
        assert [(w.name, w.workload_id) for w in listed] == [("lost", accepted.workload_id)]
        client.http = httpx.Client(base_url=client.url, timeout=30)
        client.request("DELETE", f"{PATH}/{accepted.workload_id}")

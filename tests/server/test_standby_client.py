"""The client's side of a standby (``client_failover``): which answers send a call on to
another server, and which must not (a write whose answer was lost). Transport-level
fakes: the real servers are in test_standby.py."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from ringleader.client import Client
from ringleader.errors import ServerUnreachable

A, B = "http://a.test:8470", "http://b.test:8470"
STANDBY = {"X-Ringleader-Role": "standby", "Retry-After": "1"}


def _client(urls: str, answer: Callable[[httpx.Request], httpx.Response]) -> Client:
    client = Client(urls, "id", "secret", token="t")
    client._fixed_token = True  # no token exchange: only the calls under test
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.host}")
        return answer(request)

    client.http = httpx.Client(base_url=client.url, transport=httpx.MockTransport(handler))
    client.seen = seen  # type: ignore[attr-defined]
    return client


def test_a_standby_503_goes_on_to_the_active_it_names() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "b.test":
            return httpx.Response(503, json={"message": "standby"},
                                  headers={**STANDBY, "X-Ringleader-Active": A})  # fmt: skip
        return httpx.Response(200, json={"ok": True})

    client = _client(B, answer)  # configured with the standby only
    assert client.request("POST", "/api/v1/things", json={}).json() == {"ok": True}
    assert client.seen == ["POST b.test", "POST a.test"]  # type: ignore[attr-defined]
    assert client.url == A


def test_a_server_that_does_not_answer_is_skipped_when_several_are_listed() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "a.test":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json=[])

    client = _client(f"{A},{B}", answer)
    assert client.request("GET", "/api/v1/nodes").json() == []
    assert client.url == B


def test_one_url_that_does_not_answer_fails_at_once() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client = _client(A, answer)
    with pytest.raises(ServerUnreachable):
        client.request("GET", "/api/v1/nodes")
    assert client.seen == ["GET a.test"]  # type: ignore[attr-defined]


def test_a_write_whose_answer_was_lost_is_not_sent_twice() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("cut mid-answer", request=request)

    client = _client(f"{A},{B}", answer)
    with pytest.raises(ServerUnreachable):
        client.request("POST", "/api/v1/org-unit/projects", json={})
    assert client.seen == ["POST a.test"]  # type: ignore[attr-defined]


def test_a_submission_whose_answer_was_lost_is_sent_again_with_its_key() -> None:
    keys: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["Idempotency-Key"])
        if request.url.host == "a.test":
            raise httpx.RemoteProtocolError("the server died", request=request)
        return httpx.Response(202, json={"ok": True})

    client = _client(f"{A},{B}", answer)
    headers = {"Idempotency-Key": "k-1"}
    assert (
        client.request("POST", "/api/v1/workloads/distributed", headers=headers).status_code == 202
    )
    assert keys == ["k-1", "k-1"]

"""POST /api/v1/token under load and attack: rate limits, bounded key checks, the
same work for unknown and known client ids, purged tokens, documents behind a token.

No test here measures time: "the same time for unknown ids" is pinned as "the
same verification, against a dummy hash"; "never starves other routes" as
"other routes answer while every key-check thread is blocked".
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import func, select

from ringleader.errors import Unauthorized
from ringleader.server.auth import check_access_key, dummy_hash, purge_expired
from ringleader.server.db import utcnow
from ringleader.server.models import AccessKey, Token
from ringleader.server.ratelimit import Buckets, KeyChecks, RateLimited, TokenLimits
from ringleader.server.routers import auth as auth_routes
from tests.conftest import wait_until
from tests.server.conftest import API


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _token(api: API, client_id: str | None = None, secret: str | None = None) -> httpx.Response:
    body = {
        "grantType": "client_credentials",
        "clientID": client_id or api.creds["clientId"],
        "clientSecret": secret or api.creds["clientSecret"],
    }
    return api.client.post("/api/v1/token", json=body)


# ----- the limiter -------------------------------------------------------------------


def test_a_bucket_allows_its_capacity_then_says_how_long_to_wait() -> None:
    clock = Clock()
    buckets = Buckets(3, 0.5, clock=clock)
    assert [buckets.take("a") for _ in range(3)] == [0, 0, 0]
    assert buckets.take("a") == pytest.approx(2.0)  # one request refills in 1 / 0.5 s
    assert buckets.take("b") == 0  # each key its own bucket
    clock.now += 2
    assert buckets.take("a") == 0 and buckets.take("a") > 0
    clock.now += 3600
    assert [buckets.take("a") for _ in range(4)][-1] > 0  # refills to capacity, no more


def test_buckets_are_bounded_in_number() -> None:
    buckets = Buckets(1, 1, max_keys=100, clock=Clock())
    for i in range(10_000):
        buckets.take(f"client-{i}")
    assert len(buckets) == 100


def test_limits_per_address_and_per_client_id() -> None:
    clock = Clock()
    limits = TokenLimits(Buckets(3, 1, clock=clock), Buckets(2, 1, clock=clock))
    limits.check("rl-a", "10.0.0.1")
    limits.check("rl-a", "10.0.0.2")
    with pytest.raises(RateLimited, match="clientID") as raised:
        limits.check("rl-a", "10.0.0.3")
    assert raised.value.retry_after_s == 1
    limits.check("rl-b", "10.0.0.1")
    limits.check("rl-c", "10.0.0.1")
    with pytest.raises(RateLimited, match=r"10\.0\.0\.1"):
        limits.check("rl-d", "10.0.0.1")


async def _no_wait(holds: list[float], seconds: float) -> None:
    holds.append(seconds)


def test_the_endpoint_answers_429_with_retry_after(api: API) -> None:
    clock = Clock()
    holds: list[float] = []
    api.client.app.state.token_limits = TokenLimits(
        Buckets(100, 1, clock=clock),
        Buckets(2, 0.1, clock=clock),
        sleep=lambda s: _no_wait(holds, s),
    )
    assert _token(api).status_code == 200
    assert _token(api, secret="wrong").status_code == 401  # failures count too
    limited = _token(api)
    assert limited.status_code == 429, limited.text
    assert limited.headers["Retry-After"] == "10" and "retry in 10 s" in limited.json()["message"]
    assert holds == [2.0]  # answered after a hold (capped), so a flood runs at its pace
    assert _token(api, client_id="rl-other").status_code == 401  # another id is not limited
    clock.now += 10
    assert _token(api).status_code == 200

    api.client.app.state.token_limits = TokenLimits(
        Buckets(1, 1, clock=clock), sleep=lambda s: _no_wait(holds, s)
    )
    assert _token(api).status_code == 200
    by_address = _token(api, client_id="rl-other")
    assert by_address.status_code == 429 and "testclient" in by_address.json()["message"]


def test_wrong_secrets_have_a_small_bucket_that_right_ones_never_touch(api: API) -> None:
    """Guessing is what costs PBKDF2: 5 wrong secrets for an id, then one per 5 s
    (even the right one waits: a lockout); the right secret alone is not limited so."""
    clock = Clock()
    holds: list[float] = []
    api.client.app.state.token_limits = TokenLimits(
        Buckets(1000, 100, clock=clock),
        Buckets(1000, 100, clock=clock),
        sleep=lambda s: _no_wait(holds, s),
    )
    for _ in range(20):  # a script with the right secret: never limited by the failures
        assert _token(api).status_code == 200
    assert [_token(api, secret="wrong").status_code for _ in range(6)] == [401] * 5 + [429]
    locked = _token(api)
    assert locked.status_code == 429 and "wrong secrets" in locked.json()["message"]
    assert locked.headers["Retry-After"] == "5"
    clock.now += 5
    assert _token(api).status_code == 200  # the bucket refilled: the right secret gets in


def test_refusals_are_held_on_the_loop_up_to_a_bound() -> None:
    """A held refusal waits its Retry-After (capped) without a thread; beyond
    ``max_held`` waiting ones, a refusal is answered at once (memory stays bounded)."""
    release = asyncio.Event()
    started: list[float] = []

    async def sleep(seconds: float) -> None:
        started.append(seconds)
        await release.wait()

    async def scenario() -> tuple[int, int, list[float]]:
        limits = TokenLimits(max_held=2, sleep=sleep)
        waiting = [asyncio.create_task(limits.hold(RateLimited("x", 0.2))) for _ in range(2)]
        await asyncio.sleep(0)
        held_while_full = limits.held
        await limits.hold(RateLimited("x", 30))  # over the bound: returns at once
        release.set()
        await asyncio.gather(*waiting)
        return held_while_full, limits.held, started

    held_while_full, held_after, seconds = asyncio.run(scenario())
    assert (held_while_full, held_after) == (2, 0)
    assert seconds == [1.0, 1.0]  # Retry-After is whole seconds, at least 1


# ----- the key checks ----------------------------------------------------------------


def test_unknown_and_known_ids_cost_the_same_verification(api: API) -> None:
    """An unknown id verifies the secret against a dummy hash (PBKDF2, same rounds),
    so its answer takes as long as a known id's and reads the same."""
    calls: list[tuple[str, str]] = []

    def verify(secret: str, stored: str) -> bool:
        calls.append((secret, stored))
        return False

    with api.client.app.state.readers() as s:
        stored = s.scalar(
            select(AccessKey.secret_hash).where(AccessKey.client_id == api.creds["clientId"])
        )
        with pytest.raises(Unauthorized) as unknown:
            check_access_key(s, "rl-0123456789abcdef", "guess", verify=verify)
        with pytest.raises(Unauthorized) as known:
            check_access_key(s, api.creds["clientId"], "guess", verify=verify)
    assert calls == [("guess", dummy_hash()), ("guess", stored)]
    assert str(unknown.value) == str(known.value)
    assert dummy_hash().split("$")[:2] == stored.split("$")[:2]  # the same scheme and rounds
    assert _token(api, client_id="rl-unknown").json() == _token(api, secret="wrong").json()


def test_key_checks_run_on_few_threads_and_refuse_beyond_their_queue() -> None:
    release = threading.Event()
    running: list[int] = []

    def slow(n: int) -> int:
        running.append(n)
        release.wait(30)
        return n

    async def scenario() -> None:
        checks = KeyChecks(workers=2, queue=1)
        tasks = [asyncio.create_task(checks.run(slow, n)) for n in range(3)]
        while checks.pending < 3:
            await asyncio.sleep(0)
        with pytest.raises(RateLimited, match="busy"):
            await checks.run(slow, 99)
        # The event loop is free while the threads block: this coroutine runs.
        await asyncio.to_thread(wait_until, lambda: len(running) == 2, 10, "two checks")
        assert sorted(running) == [0, 1]  # two at a time, the third waits
        release.set()
        assert await asyncio.gather(*tasks) == [0, 1, 2]
        assert checks.pending == 0
        checks.shutdown()

    asyncio.run(scenario())


def test_a_flood_of_token_requests_leaves_other_routes_answering(api: API) -> None:
    """Every key-check thread blocked and the queue full: other requests still answer
    (the token route waits on the event loop, not on the threads other routes use)."""
    assert inspect.iscoroutinefunction(auth_routes.token)  # FastAPI runs it on the loop
    checks = api.client.app.state.key_checks = KeyChecks(workers=1, queue=1)
    release = threading.Event()
    checks.executor.submit(release.wait, 30)  # the one thread is busy
    with ThreadPoolExecutor(2) as pool:
        waiting = [pool.submit(_token, api) for _ in range(2)]
        wait_until(lambda: checks.pending == 2, 30, "two token requests waiting")
        refused = _token(api)
        assert refused.status_code == 429 and "busy" in refused.json()["message"]
        assert refused.headers["Retry-After"] == "1"
        for path in ("/api/v1/workloads", "/api/v1/me", "/api/v1/org-unit/projects"):
            assert api.get(path).status_code == 200, path
        release.set()
        assert [f.result(timeout=30).status_code for f in waiting] == [200, 200]
    checks.shutdown()


# ----- tokens' lifetime --------------------------------------------------------------


def test_a_token_names_its_key_and_expired_tokens_are_purged_in_batches(api: API) -> None:
    sessions = api.client.app.state.sessions
    with sessions() as s, s.begin():
        key = s.scalar(select(AccessKey).where(AccessKey.client_id == api.creds["clientId"]))
        assert key is not None
        for _ in range(5):
            s.add(
                Token(
                    user_id=key.user_id,
                    access_key_id=key.id,
                    token_hash=f"old-{_}-{key.id}",
                    expires_at=utcnow() - timedelta(seconds=1),
                )
            )
    with sessions() as s, s.begin():
        assert purge_expired(s, utcnow(), limit=2) == 2  # bounded work
    assert _token(api).status_code == 200  # issuing purges the rest
    with sessions() as s:
        expired = s.scalar(select(func.count()).where(Token.expires_at <= utcnow()))
        assert expired == 0
        keys = set(s.scalars(select(Token.access_key_id)))
        assert keys == {key.id}


# ----- the documents -----------------------------------------------------------------


def test_documents_need_a_token_and_healthz_does_not(api: API) -> None:
    assert api.client.get("/healthz").status_code == 200
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert api.client.get(path).status_code == 401, path
        bad = api.client.get(path, headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401, path
    document = api.get("/openapi.json").json()
    assert "/api/v1/users" in document["paths"] and "/docs" not in document["paths"]
    for path in ("/docs", "/redoc"):
        page = api.get(path)
        assert page.status_code == 200 and '"/api/v1/access-keys"' in page.text, path


@pytest.mark.parametrize(
    "body",
    [
        {"clientSecret": "hunter2-do-not-echo"},  # clientID missing: the input is the body
        {"clientID": "rl-x", "clientSecret": "hunter2-do-not-echo\x00"},
        {"clientID": "rl-x", "clientSecret": "hunter2-do-not-echo" * 100},
    ],
)
def test_a_refused_token_request_never_echoes_the_secret(api: API, body: dict) -> None:
    response = api.client.post("/api/v1/token", json=body)
    assert response.status_code == 422
    assert "hunter2" not in response.text
    assert response.json()["detail"][0]["loc"][-1] in ("clientID", "clientSecret")


def test_key_checks_run_at_a_lower_cpu_priority_than_the_server() -> None:
    """Strangers' key checks yield the cores to members' routes (Linux: per-thread nice)."""
    import os
    import sys

    if sys.platform != "linux":
        pytest.skip("per-thread nice is Linux's")
    checks = KeyChecks(workers=1)
    try:

        def nice_of_this_thread() -> int:
            return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

        own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        assert checks.executor.submit(nice_of_this_thread).result(timeout=30) == min(own + 10, 19)
    finally:
        checks.shutdown()

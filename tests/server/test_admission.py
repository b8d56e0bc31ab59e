"""Admission (``server/admission.py``) on its own: a small ASGI app whose requests
wait for the test to let them answer, so what is held and what waits can be seen.
The attack on a real server is in ``security/test_bounded_work.py``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ringleader.server.admission import Admission


class Gate:
    """An ASGI app: each request announces itself, then waits for ``open`` before
    its response starts; ``stream`` requests then wait again before their body ends."""

    def __init__(self) -> None:
        self.arrived: list[str] = []
        self.go = asyncio.Event()
        self.finish = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.arrived.append(scope["path"])
        await self.go.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        if scope["path"].startswith("/stream"):
            await self.finish.wait()
        await send({"type": "http.response.body", "body": b"ok"})


def scope(
    path: str = "/x", token: str | None = "a", cookie: str = "", ip: str = "10.0.0.1"
) -> dict[str, Any]:
    """An http request's scope from ``ip`` with a bearer ``token`` and/or a cookie."""
    headers = []
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    return {"type": "http", "path": path, "headers": headers, "client": (ip, 1)}


async def request(admission: Admission, s: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await admission(s, receive, send)
    return sent


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_one_caller_has_at_most_per_caller_in_flight_and_the_rest_wait() -> None:
    async def main() -> None:
        gate = Gate()
        admission = Admission(gate, total=10, per_caller=2, queue=5)
        tasks = [asyncio.create_task(request(admission, scope())) for _ in range(4)]
        other = asyncio.create_task(request(admission, scope(token="b")))
        await settle()
        assert len(gate.arrived) == 3  # two of the first caller's, the other's one
        assert admission.in_flight() == (3, 2)
        gate.go.set()
        answers = await asyncio.gather(*tasks, other)
        assert all(a[0]["status"] == 200 for a in answers)
        assert len(gate.arrived) == 5
        assert admission.in_flight() == (0, 0)  # nothing held, no caller remembered

    asyncio.run(main())


def test_past_the_queue_a_caller_gets_429_at_once_with_retry_after() -> None:
    async def main() -> None:
        gate = Gate()
        admission = Admission(gate, total=10, per_caller=1, queue=2)
        held = [asyncio.create_task(request(admission, scope())) for _ in range(3)]
        await settle()  # one in flight, two waiting: the queue is full
        refused = await request(admission, scope())
        assert refused[0]["status"] == 429
        assert (b"retry-after", b"1") in refused[0]["headers"]
        assert "1 in progress and 2 waiting" in json.loads(refused[1]["body"])["message"]
        other = asyncio.create_task(request(admission, scope(token="b")))
        await settle()
        assert len(gate.arrived) == 2  # another caller still gets in
        gate.go.set()
        await asyncio.gather(*held, other)

    asyncio.run(main())


def test_the_total_bounds_everyone_together() -> None:
    async def main() -> None:
        gate = Gate()
        admission = Admission(gate, total=3, per_caller=2, queue=5)
        tasks = [asyncio.create_task(request(admission, scope(token=str(i)))) for i in range(5)]
        await settle()
        assert len(gate.arrived) == 3 and admission.in_flight()[0] == 3
        gate.go.set()
        await asyncio.gather(*tasks)
        assert len(gate.arrived) == 5

    asyncio.run(main())


def test_a_stream_gives_its_slot_back_when_its_response_starts() -> None:
    async def main() -> None:
        gate = Gate()
        gate.go.set()
        admission = Admission(gate, total=10, per_caller=1, queue=5)
        stream = asyncio.create_task(request(admission, scope("/stream")))
        await settle()
        assert admission.in_flight() == (0, 1)  # streaming, holding no slot
        after = await request(admission, scope("/after"))  # not behind the stream
        assert after[0]["status"] == 200
        gate.finish.set()
        await stream
        assert admission.in_flight() == (0, 0)

    asyncio.run(main())


def test_healthz_and_web_sockets_are_never_held() -> None:
    async def main() -> None:
        gate = Gate()
        admission = Admission(gate, total=1, per_caller=1, queue=0)
        held = asyncio.create_task(request(admission, scope()))
        await settle()
        health = asyncio.create_task(request(admission, scope("/healthz", token=None)))
        socket = asyncio.create_task(request(admission, {**scope("/ws"), "type": "websocket"}))
        await settle()
        assert gate.arrived == ["/x", "/healthz", "/ws"]
        gate.go.set()
        await asyncio.gather(held, health, socket)

    asyncio.run(main())


def test_callers_are_told_apart_by_token_cookie_else_address() -> None:
    admission = Admission(Gate())
    by_token = admission.caller(scope(token="t1"))
    assert by_token == admission.caller(scope(token="t1", ip="10.9.9.9"))
    assert by_token != admission.caller(scope(token="t2"))
    assert b"t1" not in by_token  # a digest: no credential kept in memory as is
    session = admission.caller(scope(token=None, cookie="theme=x; rl_session=s1; lang=en"))
    assert session == admission.caller(scope(token=None, cookie="rl_session=s1"))
    assert session != admission.caller(scope(token=None, cookie="rl_session=s2"))
    assert admission.caller(scope(token=None)) == b"ip:10.0.0.1"
    assert admission.caller(scope(token=None, ip="10.0.0.2")) == b"ip:10.0.0.2"


def test_a_callers_follows_past_the_cap_are_refused_at_the_door_unread() -> None:
    """Open follows are counted per caller as they stream; the next is a 429 before the
    app (its token check, its database) sees it.  A follow that was refused by the app
    does not count, and an ended one gives its place back."""

    async def main() -> None:
        gate = Gate()
        gate.go.set()
        admission = Admission(gate, total=10, per_caller=4, queue=5, follows=2)
        follow = {**scope("/stream/w/logs"), "query_string": b"follow=true"}
        streams = [asyncio.create_task(request(admission, follow)) for _ in range(2)]
        await settle()
        refused = await request(admission, {**follow, "query_string": b"follow=1"})
        assert refused[0]["status"] == 429
        assert "at most 2 open log follows" in json.loads(refused[1]["body"])["message"]
        assert len(gate.arrived) == 2  # the app never saw the third
        plain = await request(admission, scope("/x/logs"))  # not a follow: served
        assert plain[0]["status"] == 200
        other = asyncio.create_task(
            request(admission, {**follow, **scope("/stream/w/logs", token="b")})
        )
        await settle()
        assert gate.arrived.count("/stream/w/logs") == 3  # another caller's follow: served
        gate.finish.set()
        await asyncio.gather(*streams, other)
        again = await request(admission, follow)  # the ended streams gave their places back
        assert again[0]["status"] == 200

    asyncio.run(main())


def test_any_query_string_is_read_without_error() -> None:
    """The door reads every query string, so none may make it fail (a fuzzer's
    ``?=%C2%80`` once gave a 500 from here)."""

    async def main() -> None:
        gate = Gate()
        gate.go.set()
        admission = Admission(gate)
        for query in (b"=%C2%80", b"follow=%FF%FE", b"\xff\x00=1", b"follow", b"%%%"):
            answer = await request(admission, {**scope("/x/logs"), "query_string": query})
            assert answer[0]["status"] == 200, query

    asyncio.run(main())

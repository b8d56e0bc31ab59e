"""Issue 22, H4: the event loop does bounded work; no request of one user stalls others.

Each test performs the attack as a tenant would, against a real root server whose
workloads run as per-user OS accounts (``tests/fixtures/tenants.py``), restarted
once for this module with small bounds (``BOUNDS``) so that the caps are reached
with small inputs: a huge body or spec (a small 422 naming the first errors while
``/healthz`` answers), many ``logs?follow`` streams (429 past the cap; others'
requests and the database pool unharmed), a flood of ordinary requests from one
tenant (429 past admission's bounds, no 5xx, others served), half a request header
(closed), and a workload printing past the log cap (rotated, bounded on disk, said
in describe).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from ringleader.server.limits import SMALL_BODY_BYTES
from tests.conftest import wait_until
from tests.fixtures.tenants import Site, tenant_site  # noqa: F401 (the fixture)

# --max-follows-per-user: more than the 40 threads sync routes run on, which follows
# that each held one while waiting used to take all of.
FOLLOWS = 42
LOG_CAP = 64 * 1024  # --max-log-bytes
BOUNDS = (
    "--max-follows-per-user", str(FOLLOWS),
    "--max-log-bytes", str(LOG_CAP),
    "--header-timeout", "5",
    "--body-timeout", "2",
)  # fmt: skip
SMALL_ANSWER = 16 * 1024  # what a refusal may weigh, whatever the request did


@pytest.fixture(scope="module")
def bounded(site: Site) -> Iterator[Site]:
    """The module's tenant site, its server restarted with ``BOUNDS``."""
    site.server.kill()
    site.server.server_args = (*site.server.server_args, *BOUNDS)
    site.server.start()
    yield site


def connect(site: Site) -> socket.socket:
    return socket.create_connection(("127.0.0.1", site.server.port), timeout=60)


def read_answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of one answer with a Content-Length, read to its end."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return read_answer_after_head(sock, data)


def healthz(site: Site) -> None:
    assert httpx.get(f"{site.server.url}/healthz", timeout=60).status_code == 200


def send_all_but_the_last_byte(site: Site, path: str, body: bytes, auth: str = "") -> socket.socket:
    """A request in flight: its header and all of its body but one byte sent."""
    sock = connect(site)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{auth}\r\n"
    ).encode()
    sock.sendall(head + body[:-1])
    return sock


def test_a_huge_token_body_is_refused_unread_and_healthz_answers_meanwhile(
    bounded: Site,
) -> None:
    """2.9 MB of unknown keys to the unauthenticated token endpoint: refused with a
    small 413 on its declared size before a byte of it is sent (a stranger's body is
    never read, parsed or validated); /healthz answers meanwhile and after."""
    junk = {f"k{i}": "v" * 8 for i in range(150_000)}
    body = json.dumps({"grantType": "client_credentials", **junk}).encode()
    assert len(body) > 2_900_000
    with connect(bounded) as sock:
        sock.sendall(
            b"POST /api/v1/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
        )
        status, answer = read_answer(sock)
        healthz(bounded)
    assert status == 413 and len(answer) < SMALL_ANSWER, answer[:500]
    assert f"at most {SMALL_BODY_BYTES} bytes" in json.loads(answer)["message"], answer


def test_a_spec_of_200k_unknown_keys_and_one_of_many_errors_get_small_422s(
    bounded: Site,
) -> None:
    """A researcher's spec with 200k unknown keys: a small 422 counting them; with
    900 (under the shape bound), the first 20 of pydantic's 900 errors, each named."""
    creds = bounded.user("keys")
    auth = f"Authorization: Bearer {bounded.token(creds)}\r\n"
    project = httpx.get(
        f"{bounded.server.url}/api/v1/org-unit/projects/default",
        headers={"Authorization": auth.split(": ", 1)[1].strip()},
    ).json()["id"]

    def submit(extra: int) -> tuple[int, bytes]:
        spec = {"command": "true", "numWorkers": 1, **{f"x{i}": i for i in range(extra)}}
        body = json.dumps({"name": f"keys{extra}", "projectId": project, "spec": spec}).encode()
        sock = send_all_but_the_last_byte(bounded, "/api/v1/workloads/distributed", body, auth)
        with sock:
            healthz(bounded)  # answers while the big one is in flight
            sock.sendall(body[-1:])
            return read_answer(sock)

    status, answer = submit(200_000)
    assert status == 422 and len(answer) < SMALL_ANSWER, answer[:500]
    detail = json.loads(answer)["detail"]  # refused from its bytes, before any parse
    assert detail[0]["loc"] == ["body"] and "200005 keys or more" in detail[0]["msg"], detail

    status, answer = submit(900)
    assert status == 422 and len(answer) < SMALL_ANSWER, answer[:500]
    refusal = json.loads(answer)
    assert len(refusal["detail"]) == 20 and "900 errors" in refusal["message"], refusal
    assert refusal["detail"][0]["loc"] == ["body", "spec", "x0"], refusal["detail"][0]
    assert refusal["detail"][0]["type"] == "extra_forbidden"
    listed = bounded.as_user(creds, "list")
    assert "keys" not in listed.stdout, listed.stdout  # nothing half-created


def open_follow(site: Site, bearer: str, workload_id: str) -> tuple[socket.socket, bytes]:
    """A ``logs?follow`` request, its answer's head read (the stream stays open)."""
    sock = connect(site)
    sock.sendall(
        f"GET /api/v1/workloads/{workload_id}/logs?follow=true HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {bearer}\r\n\r\n".encode()
    )
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return sock, data


def test_follows_are_capped_per_user_and_do_not_starve_others(bounded: Site) -> None:
    """A tenant opens follows until refused (429 past ``FOLLOWS``, saying why); with
    them open another user submits, follows and reads /healthz, and the server log
    has no pool time-out.  Closing one gives its slot back."""
    greedy, other = bounded.user("greedy"), bounded.user("other")
    workload = bounded.submit(greedy, "follower", "sh", "-c", "echo up; sleep 600")
    bounded.wait_logs("follower", "up")
    bearer = bounded.token(greedy)
    streams = [open_follow(bounded, bearer, workload) for _ in range(FOLLOWS)]
    try:
        assert all(head.startswith(b"HTTP/1.1 200") for _, head in streams)
        assert bounded.server.proc is not None  # the open follows hold no thread each:
        threads = len(os.listdir(f"/proc/{bounded.server.proc.pid}/task"))
        assert threads < FOLLOWS, threads
        refused, head = open_follow(bounded, bearer, workload)
        with refused:
            status, answer = read_answer_after_head(refused, head)
            assert status == 429, head
            assert f"at most {FOLLOWS} open log follows per user".encode() in answer, answer
        healthz(bounded)
        theirs = bounded.submit(other, "theirs", "sh", "-c", "echo mine")
        assert bounded.wait_logs("theirs", "mine")
        other_stream, other_head = open_follow(bounded, bounded.token(other), theirs)
        with other_stream:
            assert other_head.startswith(b"HTTP/1.1 200"), other_head
    finally:
        for sock, _ in streams[1:]:
            sock.close()
    first = streams[0][0]
    with first:  # the closed ones' slots came back: one more opens
        again = wait_until(lambda: reopened(bounded, bearer, workload), 60, "a slot back")
        again.close()
    log = (bounded.server.home / "server-test.log").read_text(errors="replace")
    assert "QueuePool limit" not in log and "TimeoutError" not in log, log[-2000:]
    bounded.as_user(greedy, "delete", "follower")


FLOOD_THREADS = 150  # the count; past admission's 40 worker threads
FLOOD_EACH = 4


def test_a_flood_of_requests_from_one_tenant_gets_429s_not_500s_and_others_are_served(
    bounded: Site,
) -> None:
    """150 connections of one tenant each send ordinary requests back to back (a
    missing workload's logs: a 404 after a token check).  This used to hold every
    worker thread on a database connection that waiting requests held: 500s from the
    pool's time-out, /healthz and the reconciler stalled.  Now: only 200/404/429
    answers (429s saying why, with Retry-After), another user lists and submits
    meanwhile, and the server log has no pool time-out."""
    greedy, other = bounded.user("flooder"), bounded.user("bystander")
    bearer = bounded.token(greedy)
    statuses: Counter[int] = Counter()
    refusals: list[httpx.Response] = []
    lock = threading.Lock()
    started = threading.Barrier(FLOOD_THREADS + 1)

    failures: list[str] = []  # what a request got instead of an answer

    def flood() -> None:
        headers = {"Authorization": f"Bearer {bearer}"}
        with httpx.Client(base_url=bounded.server.url, headers=headers, timeout=120) as http:
            started.wait()
            for _ in range(FLOOD_EACH):
                try:
                    answer = http.get("/api/v1/workloads/no-such-workload/logs")
                except httpx.HTTPError as exc:
                    with lock:
                        failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                with lock:
                    statuses[answer.status_code] += 1
                    if answer.status_code == 429 and len(refusals) < 3:
                        refusals.append(answer)

    threads = [threading.Thread(target=flood) for _ in range(FLOOD_THREADS)]
    for thread in threads:
        thread.start()
    started.wait()
    healthz(bounded)
    theirs = bounded.submit(other, "bystanders-job", "sh", "-c", "echo served")
    assert bounded.wait_logs("bystanders-job", "served")
    listed = httpx.get(
        f"{bounded.server.url}/api/v1/workloads",
        headers={"Authorization": f"Bearer {bounded.token(other)}"},
        timeout=120,
    )
    assert listed.status_code == 200 and theirs in listed.text
    for thread in threads:
        thread.join()
    assert not failures, (len(failures), failures[:5])
    assert set(statuses) <= {404, 429}, statuses
    assert sum(statuses.values()) == FLOOD_THREADS * FLOOD_EACH
    assert statuses[404] and statuses[429], statuses
    for refusal in refusals:
        assert refusal.headers["retry-after"] == "1"
        assert "too many requests at once from this caller" in refusal.json()["message"]
    log = (bounded.server.home / "server-test.log").read_text(errors="replace")
    assert "QueuePool limit" not in log and "Exception in ASGI" not in log, log[-2000:]


def read_answer_after_head(sock: socket.socket, head: bytes) -> tuple[int, bytes]:
    """The rest of an answer whose head (and part of whose body) was read."""
    top, _, body = head.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in top.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, body
        body += chunk
    return int(top.split(b" ", 2)[1]), body


def reopened(site: Site, bearer: str, workload_id: str) -> socket.socket | None:
    sock, head = open_follow(site, bearer, workload_id)
    if head.startswith(b"HTTP/1.1 200"):
        return sock
    sock.close()
    return None


def test_half_a_request_header_is_closed_by_the_server(bounded: Site) -> None:
    """A client that sends half a header and waits: the server closes it (EOF), on a
    new connection or after an answer on a kept-alive one."""
    half = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
    with connect(bounded) as sock, connect(bounded) as idle, connect(bounded) as kept:
        sock.sendall(half)
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(kept)[0] == 200
        kept.sendall(half)
        assert sock.recv(1024) == b""  # EOF: the server closed it; no answer
        assert idle.recv(1024) == b""  # nothing at all: closed too
        assert kept.recv(1024) == b""
    healthz(bounded)


def test_a_body_that_trickles_gets_408_and_its_connection_closed(bounded: Site) -> None:
    """A client that sends a whole header and part of its body, then waits: a 408
    naming the flag, then EOF; the server answers others meanwhile and after."""
    with connect(bounded) as sock:
        sock.sendall(
            b"POST /api/v1/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"clientID": '
        )
        healthz(bounded)
        status, answer = read_answer(sock)
        assert status == 408 and b"--body-timeout" in answer, answer
        assert sock.recv(1024) == b""
    healthz(bounded)


def test_a_workload_printing_past_the_log_cap_is_rotated_and_describe_says_so(
    bounded: Site,
) -> None:
    """A tenant prints ~20 times the cap: each rank file on disk stays within the cap
    (and one ``.1`` of it), the newest lines are kept and ``describe`` says so."""
    creds = bounded.user("chatty")
    script = bounded.script(
        "chatty.py", "for i in range(20_000):\n    print('x' * 60, i)\nprint('LAST LINE')\n"
    )
    bounded.submit(creds, "chatty", "python", script)
    described = bounded.wait_phase("chatty", "Completed")
    assert "logs rotated" in described and "--max-log-bytes" in described, described
    files = list((bounded.server.home / "runs").rglob("rank-0.stdout*"))
    chatty = [p for p in files if "LAST LINE" in p.read_text(errors="replace")]
    assert len(chatty) == 1, files
    folder = chatty[0].parent
    on_disk = sum(p.stat().st_size for p in folder.glob("rank-0.stdout*"))
    line = 80
    assert on_disk <= 2 * (LOG_CAP + line), on_disk
    logs = bounded.server.cli("logs", "chatty").stdout
    assert "LAST LINE" in logs and "19999" in logs, logs[-500:]
    assert f"{'x' * 60} 0\n" not in logs  # the oldest output was rotated away
    tail = bounded.server.cli("logs", "chatty", "--tail", "3").stdout
    assert tail.splitlines()[-1].endswith("LAST LINE"), tail

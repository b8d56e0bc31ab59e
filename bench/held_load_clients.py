"""bench/held_load.py's clients, each run as a process of its own (``held_load.py --role
ROLE``) so that one busy client loop never delays another's clock: the follows, the web
UI's live refresh, the submissions and the /healthz probe. Each reads its job (the
server's URL, its tokens, the window's start and end as UNIX times) from a JSON file and
writes what it saw to another; held_load.py's docstring says what each does."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

API = "/api/v1/workloads"
FOLLOWS_PER_USER = 8  # the server's default --max-follows-per-user
# A connection the server closed as the request went out (its keep-alive timer ends an
# idle connection just as the client reuses it) is no answer: the real clients send
# again. The ringleader client resends a submission, with its Idempotency-Key, after
# 0.5 s and 1 s (``ringleader.client``); a browser resends a GET once, at once.
CUT = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError, httpx.ConnectError)
SUBMIT_RESENDS_S = (0.5, 1.0)
BROWSER_RESENDS_S = (0.0,)


async def resending(
    send: Callable[[], Awaitable[httpx.Response]], waits: Sequence[float], out: dict[str, Any]
) -> httpx.Response:
    """``send``'s answer, sent again after each of ``waits`` when the connection was cut
    (counted in ``out["resent"]``); the last cut, or any other failure, raises."""
    for wait in waits:
        try:
            return await send()
        except CUT:
            out["resent"] = out.get("resent", 0) + 1
            await asyncio.sleep(wait)
    return await send()


async def follows(job: dict[str, Any]) -> dict[str, Any]:
    """Open a follow per (token, slot) over the targets, 50 a second; hold them to the end."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    out: dict[str, Any] = {"opened": 0, "errors": [], "lines": 0, "ended_early": 0}
    open_at_start = 0
    timeout = httpx.Timeout(30, read=None)
    async with httpx.AsyncClient(base_url=job["url"], limits=limits, timeout=timeout) as client:

        async def one(i: int, token: str) -> None:
            target = job["targets"][i % len(job["targets"])]
            path = f"{API}/{target}/logs"
            headers = {"Authorization": f"Bearer {token}"}
            try:
                async with client.stream(
                    "GET", path, params={"follow": "true"}, headers=headers
                ) as answer:
                    if answer.status_code != 200:
                        out["errors"].append(f"follow {answer.status_code}")
                        return
                    out["opened"] += 1
                    async for chunk in answer.aiter_text():
                        out["lines"] += chunk.count("\n")
                    if time.time() < job["t_end"]:  # a stream that ended by itself
                        out["ended_early"] += 1
                        out["errors"].append("a follow ended before the window's end")
            except httpx.HTTPError as exc:
                if time.time() < job["t_end"]:
                    out["errors"].append(f"follow {type(exc).__name__}: {exc}"[:200])

        tasks = []
        for i in range(job["follows"]):
            token = job["tokens"][i // FOLLOWS_PER_USER]
            tasks.append(asyncio.create_task(one(i, token)))
            await asyncio.sleep(0.02)
        await asyncio.sleep(max(0.0, job["t_start"] - time.time()))
        open_at_start = out["opened"]
        await asyncio.sleep(max(0.0, job["t_end"] - time.time()))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    out["open_at_window_start"] = open_at_start
    return out


async def ui(job: dict[str, Any]) -> dict[str, Any]:
    """The workloads page's live refresh, one session per client (static/workloads.js)."""
    out: dict[str, Any] = {"live": 0, "changed": 0, "errors": [], "ms": [], "resent": 0}
    limits = httpx.Limits(max_connections=None)
    async with httpx.AsyncClient(base_url=job["url"], limits=limits, timeout=60) as client:

        async def one(i: int, token: str) -> None:
            cookies = {"rl_session": token}
            await asyncio.sleep(10.0 * i / len(job["tokens"]))  # the pages open over 10 s
            while True:  # a browser opening the page (a failure is an error, then again)
                try:
                    page = await resending(
                        lambda: client.get(
                            "/workloads", cookies=cookies, headers={"Accept": "text/html"}
                        ),
                        BROWSER_RESENDS_S,
                        out,
                    )
                    if page.status_code == 200:
                        break
                    out["errors"].append(f"page {page.status_code}")
                except httpx.HTTPError as exc:
                    out["errors"].append(f"page {type(exc).__name__}")
                if time.time() >= job["t_end"]:
                    return
            found = re.search(r'data-version="(\w+)"', page.text)
            version = found.group(1) if found else ""
            have = re.findall(r'data-v="(\w+)"', page.text)
            await asyncio.sleep(2.0 * i / len(job["tokens"]))  # the clients spread over 2 s
            while time.time() < job["t_end"]:
                await asyncio.sleep(2.0)
                params = {"version": version, "have": ".".join(have)}
                started = time.perf_counter()
                try:
                    answer = await resending(
                        lambda: client.get(
                            "/workloads/live",
                            params=params,  # noqa: B023 - sent before params changes
                            cookies=cookies,
                            headers={"X-Requested-With": "fetch"},
                        ),
                        BROWSER_RESENDS_S,
                        out,
                    )
                except httpx.HTTPError as exc:
                    out["errors"].append(f"live {type(exc).__name__}")
                    continue
                ms = (time.perf_counter() - started) * 1000
                if job["t_start"] <= time.time() <= job["t_end"]:
                    out["live"] += 1
                    out["ms"].append(ms)
                if answer.status_code != 200:
                    out["errors"].append(f"live {answer.status_code}")
                    continue
                data = answer.json()
                if "order" in data:
                    out["changed"] += job["t_start"] <= time.time() <= job["t_end"]
                    version, have = data["v"], data["order"]

        done = await asyncio.gather(
            *(one(i, t) for i, t in enumerate(job["tokens"])), return_exceptions=True
        )
        out["errors"] += [f"ui {type(e).__name__}: {e}"[:200] for e in done if e is not None]
    return out


async def submit(job: dict[str, Any]) -> dict[str, Any]:
    """POSTs at ``rate`` a second in the window, open loop, at most ``in_flight`` at once."""
    out: dict[str, Any] = {
        "sent": 0, "accepted": 0, "skipped": 0, "errors": [], "ms": [], "resent": 0
    }  # fmt: skip
    limits = httpx.Limits(max_connections=job["in_flight"])
    gate = asyncio.Semaphore(job["in_flight"])
    async with httpx.AsyncClient(base_url=job["url"], limits=limits, timeout=30) as client:

        async def one(i: int) -> None:
            token = job["tokens"][i % len(job["tokens"])]
            body = {
                "name": f"load-{i:06d}",
                "projectId": job["project"],
                "spec": {"command": "python train.py", "numWorkers": 2},
            }
            headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": str(uuid.uuid4())}
            started = time.perf_counter()
            try:
                answer = await resending(
                    lambda: client.post(f"{API}/distributed", json=body, headers=headers),
                    SUBMIT_RESENDS_S,
                    out,
                )
            except httpx.HTTPError as exc:
                out["errors"].append(f"submit {type(exc).__name__}")
                return
            finally:
                gate.release()
            out["ms"].append((time.perf_counter() - started) * 1000)
            if answer.status_code == 202:
                out["accepted"] += 1
            else:
                out["errors"].append(f"submit {answer.status_code} {answer.text[:120]}")

        await asyncio.sleep(max(0.0, job["t_start"] - time.time()))
        tasks, i = [], 0
        while True:
            due = job["t_start"] + i / job["rate"]
            if due >= job["t_end"]:
                break
            await asyncio.sleep(max(0.0, due - time.time()))
            if gate.locked():  # the server is behind by in_flight answers: this one waits
                out["skipped"] += 1
            await gate.acquire()
            if time.time() >= job["t_end"]:  # the window closed while it waited
                gate.release()
                break
            out["sent"] += 1
            tasks.append(asyncio.create_task(one(i)))
            i += 1
        await asyncio.gather(*tasks)
    out["rate_achieved"] = out["accepted"] / (job["t_end"] - job["t_start"])
    return out


async def probe(job: dict[str, Any]) -> dict[str, Any]:
    """GET /healthz every 20 ms, one at a time, through the window."""
    out: dict[str, Any] = {"ms": [], "errors": []}
    async with httpx.AsyncClient(base_url=job["url"], timeout=10) as client:
        await asyncio.sleep(max(0.0, job["t_start"] - time.time()))
        while time.time() < job["t_end"]:
            started = time.perf_counter()
            try:
                answer = await client.get("/healthz")
                if answer.status_code != 200:
                    out["errors"].append(f"healthz {answer.status_code}")
            except httpx.HTTPError as exc:
                out["errors"].append(f"healthz {type(exc).__name__}")
            out["ms"].append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.02)
    return out


ROLES = {"follows": follows, "ui": ui, "submit": submit, "probe": probe}


def run_role(role: str, job_file: str, out_file: str) -> None:
    job = json.loads(Path(job_file).read_text())
    result = asyncio.run(ROLES[role](job))
    Path(out_file).write_text(json.dumps(result))

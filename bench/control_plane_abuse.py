"""The abuse phases of bench/control_plane.py: a token flood, and big submissions.

flood: a server with its loops off (``api`` mode) holds --flood-workloads
Pending workloads; ``GET /api/v1/workloads?limit=50`` is timed sequentially
in chunks of 25, alternately quiet and while FLOOD_THREADS client threads
POST ``/api/v1/token`` with the admin's client id and a wrong secret as fast
as the server answers (each thread its own keep-alive connection). The
flooding threads live in a process of their own (``python
bench/control_plane_abuse.py --flood URL CLIENT_ID``), so they do not share
the timing client's interpreter lock. The flood is running (a first answer
seen on every thread) before a flooded chunk starts and is stopped (every
thread joined, the process gone) before a quiet one. Figure: p99
while flooded / p99 quiet, same server, same run. Target: within 1.5x (a
wrong secret must not cost the server more than a bounded, rate-limited
check; a key derivation per attempt on every thread lets the flood take the
CPU from the readers).

big submissions: the throughput phase's burst with a ~32 KB command (the most a command may hold)
(``big_command``: ``python -c`` of a long string literal, a valid command
the server stores and would run), next to the normal burst's figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

FLOOD_THREADS = 16
TARGET_FLOOD_RATIO = 1.5
BIG_COMMAND_BYTES = 32 * 1024  # the most a command may hold (spec.MAX_COMMAND_CHARS)
CHUNK = 25  # GETs per quiet or flooded stretch


def big_command(size: int = BIG_COMMAND_BYTES) -> str:
    """A valid command line of exactly ``size`` characters (ASCII)."""
    head, tail = "python -c \"s = '", "'; print(len(s))\""
    return head + "x" * (size - len(head) - len(tail)) + tail


class TokenFlood:
    """``threads`` clients asking for a token with a wrong secret until ``stop()``."""

    def __init__(self, url: str, client_id: str, threads: int = FLOOD_THREADS) -> None:
        self.url, self.client_id, self.threads = url, client_id, threads
        self.statuses: Counter[int | str] = Counter()
        self.lock = threading.Lock()
        self.running = threading.Event()
        self.workers: list[threading.Thread] = []
        self.first_answers = threading.Barrier(threads + 1)
        self.started = self.stopped = 0.0

    def _work(self, index: int) -> None:
        body = {
            "grantType": "client_credentials",
            "clientID": self.client_id,
            "clientSecret": f"wrong-secret-{index}",
        }
        first = True
        with httpx.Client(base_url=self.url, timeout=60) as client:
            while self.running.is_set():
                try:
                    status: int | str = client.post("/api/v1/token", json=body).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                with self.lock:
                    self.statuses[status] += 1
                if first:
                    first = False
                    self.first_answers.wait()
        if first:  # stopped before its first answer: let start() go on
            self.first_answers.abort()

    def start(self) -> None:
        """Start the threads; returns once every one has had an answer."""
        self.running.set()
        self.workers = [
            threading.Thread(target=self._work, args=(i,), daemon=True) for i in range(self.threads)
        ]
        for worker in self.workers:
            worker.start()
        self.first_answers.wait(timeout=120)
        self.started = time.perf_counter()

    def stop(self) -> None:
        self.stopped = time.perf_counter()
        self.running.clear()
        for worker in self.workers:
            worker.join(timeout=120)
        self.first_answers.reset()


def timed_gets(server: Any, count: int, params: dict[str, str]) -> list[float]:
    """Milliseconds for each of ``count`` sequential list requests (a full page each)."""
    got = []
    for _ in range(count):
        t = time.perf_counter()
        response = server.request("GET", "/api/v1/workloads", params=params)
        elapsed = time.perf_counter() - t
        if response.status_code != 200 or len(response.json()["workloads"]) != 50:
            raise RuntimeError(f"GET {params}: {response.status_code} {response.text[:300]}")
        got.append(elapsed * 1000)
    return got


class FloodProcess:
    """A TokenFlood in a child process: started, flowing, then stopped on request."""

    def __init__(self, url: str, client_id: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--flood", url, client_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()  # every thread has had an answer
        if ready.strip() != "flooding":
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the token flood did not start: {ready!r}")

    def stop(self) -> dict[str, Any]:
        """Stop it; what it saw: answers by status, and how long it flooded."""
        out, _ = self.proc.communicate("stop\n", timeout=180)
        return json.loads(out.strip().splitlines()[-1])


def flood_main(url: str, client_id: str) -> int:
    """The child's side: flood until a line (or EOF) on stdin, then report."""
    flood = TokenFlood(url, client_id)
    flood.start()
    print("flooding", flush=True)
    sys.stdin.readline()
    flood.stop()
    report = {
        "statuses": {str(k): v for k, v in flood.statuses.items()},
        "seconds": flood.stopped - flood.started,
    }
    print(json.dumps(report), flush=True)
    return 0


def list_under_flood(
    server: Any, client_id: str, requests: int, percentile: Any, clean: Any
) -> dict[str, Any]:
    """Quiet and flooded list latencies, interleaved in chunks; their p99 ratio."""
    params = {"limit": "50"}
    timed_gets(server, 10, params)  # warm-up
    quiet: list[float] = []
    flooded: list[float] = []
    flood_s = 0.0
    statuses: Counter[str] = Counter()
    for first in range(0, requests, CHUNK):
        n = min(CHUNK, requests - first)
        quiet += clean("flood: quiet", lambda n=n: timed_gets(server, n, params))[0]
        flood = FloodProcess(server.url, client_id)
        try:
            flooded += timed_gets(server, n, params)
        finally:
            seen = flood.stop()
        flood_s += seen["seconds"]
        statuses.update(seen["statuses"])
    quiet_p99, flooded_p99 = percentile(quiet, 99), percentile(flooded, 99)
    return {
        "threads": FLOOD_THREADS,
        "requests_each": requests,
        "quiet": {"p50_ms": percentile(quiet, 50), "p99_ms": quiet_p99, "max_ms": max(quiet)},
        "flooded": {
            "p50_ms": percentile(flooded, 50),
            "p99_ms": flooded_p99,
            "max_ms": max(flooded),
        },
        "p99_ratio": flooded_p99 / quiet_p99,
        "meets_target": flooded_p99 / quiet_p99 <= TARGET_FLOOD_RATIO,
        "flood_answers": dict(sorted(statuses.items())),
        "flood_answers_per_s": sum(statuses.values()) / flood_s if flood_s else float("nan"),
        "flood_got_a_token": statuses.get("200", 0),  # a wrong secret must never get one
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--flood":
        sys.exit(flood_main(sys.argv[2], sys.argv[3]))
    sys.exit(f"usage: python {sys.argv[0]} --flood URL CLIENT_ID (started by control_plane.py)")

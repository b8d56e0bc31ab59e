"""The attacks of bench/control_plane_abuse.py, each run in a process of its own.

Why a child process: the timing client must not share an interpreter lock with
dozens of attacking threads, or the figures would measure the client.  The
parent starts ``python bench/abuse_attacks.py ATTACK URL ARG [quick]``; the child
prints ``ready`` once the attack is in effect (every thread has had a first
answer, or holds its connection), keeps it up until a line (or EOF) arrives on
its standard input, then stops every thread and prints one JSON line: answers
by status and how long it attacked.  ``quick`` (the smoke run) holds a sixth of
the follows and half-sent headers: enough to pass the server's caps, few
enough that a loaded 2-core machine opens them all in seconds.

The attacks (the issue's findings, scaled to a 2-core machine):

- ``token_flood``: 16 threads POST ``/api/v1/token`` with a wrong secret;
- ``big_body``: 3 threads POST a 2.9 MB JSON body to ``/api/v1/token``
  (unauthenticated: anyone who reaches the port);
- ``many_keys``: 3 threads submit a spec with 200,000 unknown keys (a
  researcher's token);
- ``follows``: 150 open ``logs?follow=true`` streams of the attacker's own
  running workload, re-opened when the server ends or refuses one;
- ``half_open``: 200 connections that send half a request header and nothing
  more, re-opened when the server closes one;
- ``metrics``: 3 threads GET ``.../metrics`` of a workload that wrote many
  large metrics files;
- ``busy`` (the control): one thread that only spins, sending nothing.  An
  attacking process on this machine takes up to a core of its own (its threads
  share one interpreter lock, plus the kernel's work for its sockets): what that
  alone does to the timed requests' p99 is the floor an attack's ratio is read
  against.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx

BIG_BODY_BYTES = int(2.9 * 1024 * 1024)
MANY_KEYS = 200_000
FOLLOWS = 150
HALF_OPEN = 200
QUICK_SHARE = 6  # --quick holds FOLLOWS // 6 follows (over the per-user cap of 8)
CONNECT_S = 30  # a connection the server never accepts is an error, not a hang


class Attack:
    """``threads`` workers each repeating ``once(client, index)`` until stopped.

    ``held``: ``once`` holds a connection open until the attack stops (a follow, a
    half-sent header); its worker signals readiness itself through ``ready()``.
    """

    def __init__(
        self, threads: int, once: Callable[[Any, str, int], int | str], held: bool = False
    ) -> None:
        self.threads, self.once, self.held = threads, once, held
        self.statuses: Counter[int | str] = Counter()
        self.lock = threading.Lock()
        self.running = threading.Event()
        self.first = threading.Barrier(threads + 1)
        self.workers: list[threading.Thread] = []
        self.started = self.stopped = 0.0

    def ready(self) -> None:
        """This worker's first answer came, or its connection holds."""
        with contextlib.suppress(threading.BrokenBarrierError):
            self.first.wait(timeout=300)

    def count(self, status: int | str) -> None:
        with self.lock:
            self.statuses[status] += 1

    def _work(self, url: str, index: int) -> None:
        signalled = False
        timeout = httpx.Timeout(120, read=5 if self.held else 120, connect=CONNECT_S)
        with httpx.Client(base_url=url, timeout=timeout) as client:
            while self.running.is_set():
                try:
                    status = self.once(client, url, index)
                except (httpx.HTTPError, OSError) as exc:
                    status = type(exc).__name__
                self.count(status)
                if not signalled and not self.held:
                    signalled = True
                    self.ready()
        if not signalled and not self.held:
            self.first.abort()  # stopped before a first answer: let start() go on

    def start(self, url: str) -> None:
        self.running.set()
        self.workers = [
            threading.Thread(target=self._work, args=(url, i), daemon=True)
            for i in range(self.threads)
        ]
        for worker in self.workers:
            worker.start()
        self.ready()
        self.started = time.perf_counter()

    def stop(self) -> None:
        self.stopped = time.perf_counter()
        self.running.clear()
        for worker in self.workers:
            worker.join(timeout=180)


def token_flood(client_id: str, _quick: bool = False) -> Attack:
    def once(client: httpx.Client, _url: str, index: int) -> int:
        body = {"grantType": "client_credentials", "clientID": client_id}
        body["clientSecret"] = f"wrong-secret-{index}"
        return client.post("/api/v1/token", json=body).status_code

    return Attack(16, once)


def big_body(_: str, _quick: bool = False) -> Attack:
    payload = json.dumps({"grantType": "client_credentials", "clientID": "x" * BIG_BODY_BYTES})
    headers = {"Content-Type": "application/json"}

    def once(client: httpx.Client, _url: str, _index: int) -> int:
        return client.post("/api/v1/token", content=payload, headers=headers).status_code

    return Attack(3, once)


def many_keys(token_and_project: str, _quick: bool = False) -> Attack:
    token, project = token_and_project.split(" ", 1)
    spec: dict[str, Any] = {"command": "true", "numWorkers": 1}
    spec.update({f"k{i}": 1 for i in range(MANY_KEYS)})
    payload = json.dumps({"name": "many-keys", "projectId": project, "spec": spec})
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def once(client: httpx.Client, _url: str, _index: int) -> int:
        url = "/api/v1/workloads/distributed"
        return client.post(url, content=payload, headers=headers).status_code

    return Attack(3, once)


def metrics(token_and_workload: str, _quick: bool = False) -> Attack:
    token, workload = token_and_workload.split(" ", 1)
    headers = {"Authorization": f"Bearer {token}"}

    def once(client: httpx.Client, _url: str, _index: int) -> int:
        return client.get(f"/api/v1/workloads/{workload}/metrics", headers=headers).status_code

    return Attack(3, once)


def follows(token_and_workload: str, quick: bool = False) -> Attack:
    """Each worker holds one follow open; a refused one (a cap) tries again a second later."""
    token, workload = token_and_workload.split(" ", 1)
    headers = {"Authorization": f"Bearer {token}"}
    signalled: set[int] = set()

    def once(client: httpx.Client, _url: str, index: int) -> int | str:
        url = f"/api/v1/workloads/{workload}/logs"
        with client.stream("GET", url, params={"follow": "true"}, headers=headers) as response:
            if index not in signalled:
                signalled.add(index)
                attack.ready()
            if response.status_code != 200:
                time.sleep(1.0)
                return response.status_code
            attack.count("opened")
            chunks = response.iter_raw(1)
            while attack.running.is_set():
                try:
                    next(chunks)
                except StopIteration:
                    return "ended by server"
                except httpx.ReadTimeout:
                    continue
            return "held to the end"

    attack = Attack(FOLLOWS // QUICK_SHARE if quick else FOLLOWS, once, held=True)
    return attack


def half_open(_: str, quick: bool = False) -> Attack:
    """Connections that send half a header and wait; re-opened when the server closes one."""
    signalled: set[int] = set()

    def once(_client: httpx.Client, url: str, index: int) -> str:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=CONNECT_S) as sock:
            sock.settimeout(5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            if index not in signalled:
                signalled.add(index)
                attack.ready()
            while attack.running.is_set():
                try:
                    if sock.recv(4096) == b"":
                        return "closed by server"
                except TimeoutError:
                    continue
                except OSError:
                    return "closed by server"
            return "held to the end"

    attack = Attack(HALF_OPEN // QUICK_SHARE if quick else HALF_OPEN, once, held=True)
    return attack


def busy(_: str, _quick: bool = False) -> Attack:
    """A core taken and nothing sent: the machine's share of an attack's ratio."""

    def once(_client: httpx.Client, _url: str, _index: int) -> str:
        deadline = time.perf_counter() + 0.5
        while time.perf_counter() < deadline:
            pass
        return "spun"

    return Attack(1, once)


ATTACKS: dict[str, Callable[[str, bool], Attack]] = {
    "token_flood": token_flood,
    "big_body": big_body,
    "many_keys": many_keys,
    "follows": follows,
    "half_open": half_open,
    "metrics": metrics,
    "busy": busy,
}


def child_main(name: str, url: str, arg: str, scale: str = "full") -> int:
    """The child's side: attack until a line (or EOF) on stdin, then report."""
    attack = ATTACKS[name](arg, scale == "quick")
    attack.start(url)
    print("ready", flush=True)
    sys.stdin.readline()
    attack.stop()
    report = {
        "statuses": {str(k): v for k, v in attack.statuses.items()},
        "seconds": attack.stopped - attack.started,
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) in (4, 5) and sys.argv[1] in ATTACKS and sys.argv[4:] in ([], ["quick"]):
        sys.exit(child_main(*sys.argv[1:]))
    sys.exit(
        f"usage: python {sys.argv[0]} ATTACK URL ARG [quick] (started by control_plane_abuse.py)"
    )

"""Issue 27, item 1's case: submissions/s with 32 clients, the loops on, both databases.

One server per database (``bench_server.py``'s ``held`` mode: ``ringleader server``'s
own code whose background loops run against a backend that accepts each workload and
keeps its pods Pending, so admission and polling write while the POSTs arrive); for
each round, on each server in turn:

- ``submit``: ``--submissions`` POSTs of plain distributed workloads (numWorkers 2:
  3 pods each, ``python -c pass``), each with its own ``Idempotency-Key`` as the
  ringleader client sends, from ``--clients`` threads, one keep-alive connection
  each, all with the one token (one user's scripts); submissions/s = accepted (202)
  / wall time of the burst, p50 / p99 of a POST as its client saw it;
- ``me``: ``--gets`` authenticated ``GET /api/v1/me`` from the same clients: the
  per-request floor (HTTP, the door, the token check, a reader session);
- ``healthz``: as many ``GET /healthz`` (HTTP alone, no token, never held).

The clients are plain ``http.client`` connections (cheap: they share the server's two
cores). Every accepted workload is checked to be in the database, once. The machine
may be shared: ``uptime``'s load averages are recorded before and after each figure,
and the two databases alternate, so drift hits both. Writes
bench/results/control_plane_submit.json and .md (not with --quick).

Usage: python bench/control_plane_submit.py [--rounds 3] [--submissions 2000]
       python bench/control_plane_submit.py --quick
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_quiet import code_version, percentile
from bench_server import API, Databases, Server

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_PER_S = 500.0
TARGET_P99_MS = 100.0


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class Clients:
    """``count`` threads, each with its own keep-alive connection to ``server``."""

    def __init__(self, server: Server, count: int) -> None:
        self.host, self.port = "127.0.0.1", server.port
        self.headers = dict(server.headers)
        self.count = count
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(count)

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        return conn

    def call(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> int:
        for attempt in range(2):  # a keep-alive connection the server closed: once more
            conn = self._connection()
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                return response.status
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def timed(self, requests: list[tuple[str, str, bytes | None, dict[str, str]]]) -> dict:
        """Send ``requests`` from every thread at once; statuses, latencies and wall."""
        self.run([("GET", "/healthz", None, {})] * self.count)  # connections open, warm

        def one(request: tuple[str, str, bytes | None, dict[str, str]]) -> tuple[int, float]:
            started = time.perf_counter()
            status = self.call(*request)
            return status, time.perf_counter() - started

        started = time.perf_counter()
        results = list(self.pool.map(one, requests))
        return {"results": results, "wall_s": time.perf_counter() - started}

    def run(self, requests: list[tuple[str, str, bytes | None, dict[str, str]]]) -> list[int]:
        return list(self.pool.map(lambda r: self.call(*r), requests))

    def close(self) -> None:
        self.pool.shutdown()


def figures(server: Server, timed: dict, cpu_s: float, ok: int) -> dict[str, float]:
    good = [lat for status, lat in timed["results"] if status == ok]
    bad: dict[str, int] = {}
    for status, _ in timed["results"]:
        if status != ok:
            bad[str(status)] = bad.get(str(status), 0) + 1
    count = len(timed["results"])
    return {
        "per_s": len(good) / timed["wall_s"],
        "p50_ms": percentile(good, 50) * 1000,
        "p99_ms": percentile(good, 99) * 1000,
        "server_cpu_ms_per_request": cpu_s * 1000 / count,
        "errors": sum(bad.values()),
        "statuses": bad,  # type: ignore[dict-item]
        "wall_s": timed["wall_s"],
    }


def measure(server: Server, clients: Clients, what: str, count: int, tag: str) -> dict[str, Any]:
    """One figure: ``what`` (submit, me, healthz) ``count`` times from every client."""
    headers = {**clients.headers, "Content-Type": "application/json"}
    if what == "submit":
        requests = []
        for i in range(count):
            body = server.body(f"{tag}-{i}", "python -c pass")
            body["spec"]["numWorkers"] = 2  # master + 2 workers: 3 pods
            keyed = {**headers, "Idempotency-Key": str(uuid.uuid4())}
            requests.append(("POST", f"{API}/distributed", json.dumps(body).encode(), keyed))
        ok = 202
    elif what == "me":
        requests = [("GET", "/api/v1/me", None, headers)] * count
        ok = 200
    else:
        requests = [("GET", "/healthz", None, {})] * count
        ok = 200
    before, cpu = load(), server.cpu_s()
    timed = clients.timed(requests)
    out = figures(server, timed, server.cpu_s() - cpu, ok)
    out["load_before"], out["load_after"] = before, load()  # type: ignore[assignment]
    return out


@contextlib.contextmanager
def profiled(server: Server, path: Path | None) -> Iterator[None]:
    """py-spy (``--gil``: the thread holding the interpreter's lock) over the server
    while the block runs, written to ``path`` (raw: one stack and its count a line)."""
    if path is None:
        yield
        return
    spy = shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--profile needs py-spy (pip install py-spy)")
    assert server.proc is not None
    argv = [spy, "record", "--gil", "--nonblocking", "-r", "250", "-p", str(server.proc.pid)]
    argv += ["-f", "raw", "-o", str(path)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes what it has on Ctrl-C
        proc.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds per database (median)")
    parser.add_argument("--submissions", type=int, default=2000, help="POSTs per round")
    parser.add_argument("--gets", type=int, default=2000, help="GET /api/v1/me per round")
    parser.add_argument("--clients", type=int, default=32, help="client threads")
    parser.add_argument("--databases", default="sqlite,postgresql", help="sqlite,postgresql")
    parser.add_argument("--out", default="control_plane_submit", help="results file stem")
    parser.add_argument(
        "--mode",
        choices=("held", "api"),
        default="held",
        help="held: the loops on (the issue's case); api: the loops not started (the "
        "request path alone)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="a directory: py-spy (--gil, raw) over each database's first round",
    )
    parser.add_argument("--quick", action="store_true", help="1 round of 300; writes nothing")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.submissions, args.gets = 1, 300, 300
    kinds = [k.strip() for k in args.databases.split(",") if k.strip()]
    if not kinds or any(k not in ("sqlite", "postgresql") for k in kinds):
        parser.error("--databases takes sqlite and/or postgresql")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    tmp = Path(tempfile.mkdtemp(prefix="ringleader-bench-submit-"))
    dbs = Databases(tmp, kinds)
    servers: dict[str, Server] = {}
    clients: dict[str, Clients] = {}
    samples: dict[str, dict[str, list[dict[str, Any]]]] = {k: {} for k in kinds}
    accepted = dict.fromkeys(kinds, 0)
    try:
        dbs.start()
        for kind in kinds:
            home, url, _ = dbs.fresh(kind, "submit")
            servers[kind] = Server(home, url, args.mode)
            servers[kind].start()
            clients[kind] = Clients(servers[kind], args.clients)
            measure(servers[kind], clients[kind], "submit", 100, "warm")  # untimed
            measure(servers[kind], clients[kind], "me", 100, "warm")
            accepted[kind] += 100
        for round_ in range(args.rounds):
            for kind in kinds:
                server, pool = servers[kind], clients[kind]
                for what, count in (
                    ("submit", args.submissions),
                    ("me", args.gets),
                    ("healthz", args.gets),
                ):
                    spied = None
                    if args.profile is not None and round_ == 0 and what != "healthz":
                        args.profile.mkdir(parents=True, exist_ok=True)
                        spied = args.profile / f"{kind}-{what}.txt"
                    with profiled(server, spied):
                        sample = measure(server, pool, what, count, f"r{round_}")
                    if what == "submit":
                        accepted[kind] += count - sample["errors"]
                    samples[kind].setdefault(what, []).append(sample)
                    print(
                        f"{kind:10s} round {round_ + 1} {what:8s} {sample['per_s']:7.0f}/s "
                        f"p50 {sample['p50_ms']:6.1f} p99 {sample['p99_ms']:6.1f} ms "
                        f"cpu {sample['server_cpu_ms_per_request']:.2f} ms/req "
                        f"errors {sample['statuses'] or 0} load {sample['load_before']}",
                        flush=True,
                    )
        for kind in kinds:
            stored = servers[kind].get(f"{API}/count")["count"]
            if stored != accepted[kind]:
                raise RuntimeError(f"{kind}: {accepted[kind]} accepted but {stored} stored")
    finally:
        for pool in clients.values():
            pool.close()
        for server in servers.values():
            with contextlib.suppress(Exception):
                server.stop()
        dbs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    report = {
        "benchmark": "control_plane_submit",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "code": code_version(),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "databases": {k: dbs.version(k) if k == "sqlite" else "PostgreSQL" for k in kinds},
        "median": {
            kind: {
                what: {
                    key: statistics.median(s[key] for s in runs)
                    for key in ("per_s", "p50_ms", "p99_ms", "server_cpu_ms_per_request")
                }
                for what, runs in by_what.items()
            }
            for kind, by_what in samples.items()
        },
        "samples": samples,
    }
    table = markdown(report, kinds)
    print(table)
    if not args.quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=2) + "\n")
        (RESULTS / f"{args.out}.md").write_text(table)
    return 0


def markdown(report: dict[str, Any], kinds: list[str]) -> str:
    names = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    med, args = report["median"], report["args"]
    lines = [
        "# Submissions with 32 clients, loops on (issue 27, item 1)",
        "",
        f"{report['date']}; commit {report['code']['commit'][:7]}; {report['cpus']} CPUs shared "
        "by the server, the clients and PostgreSQL (and, on this machine, other work: see "
        "the load averages).",
        "",
        f"| metric | {' | '.join(names[k] for k in kinds)} | target |",
        "|---|" + "---|" * len(kinds) + "---|",
    ]

    def row(metric: str, fn: Callable[[str], str], target: str = "") -> None:
        lines.append(f"| {metric} | {' | '.join(fn(k) for k in kinds)} | {target} |")

    row("submissions/s", lambda k: f"{med[k]['submit']['per_s']:.0f}", f">= {TARGET_PER_S:g}")
    row(
        "submit p50 / p99 (ms)",
        lambda k: f"{med[k]['submit']['p50_ms']:.1f} / {med[k]['submit']['p99_ms']:.1f}",
        f"p99 < {TARGET_P99_MS:g}",
    )
    row(
        "server CPU per submission (ms)",
        lambda k: f"{med[k]['submit']['server_cpu_ms_per_request']:.2f}",
    )
    row("GET /api/v1/me per s", lambda k: f"{med[k]['me']['per_s']:.0f}")
    row(
        "GET /api/v1/me p50 / p99 (ms)",
        lambda k: f"{med[k]['me']['p50_ms']:.1f} / {med[k]['me']['p99_ms']:.1f}",
    )
    row(
        "server CPU per GET /api/v1/me (ms)",
        lambda k: f"{med[k]['me']['server_cpu_ms_per_request']:.2f}",
    )
    row("GET /healthz per s (HTTP alone)", lambda k: f"{med[k]['healthz']['per_s']:.0f}")

    def loads(kind: str) -> str:
        runs = report["samples"][kind]["submit"]
        return ", ".join(f"{s['load_before'][0]:.2f}" for s in runs)

    row("1-min load average before each submit burst", loads)
    if args.get("mode") == "api":
        lines[0] = "# Submissions with 32 clients, loops NOT started (the request path alone)"
    lines += [
        "",
        f"Each figure: the median of {args['rounds']} rounds; a round is "
        f"{args['submissions']} POSTs (numWorkers 2: 3 pods, `python -c pass`, an "
        f"Idempotency-Key each), then {args['gets']} GET /api/v1/me and as many GET /healthz, "
        f"from {args['clients']} client threads (http.client, one keep-alive connection "
        "each, one token), on one server per database "
        + (
            "whose background loops are not started (the request path alone). "
            if args.get("mode") == "api"
            else "whose background loops run against a backend that holds every workload Pending. "
        )
        + "The databases alternate round by "
        "round. Every accepted workload was found in the database at the end. "
        + ", ".join(f"{names[k]}: {v}" for k, v in report["databases"].items())
        + (" (fsync off, synchronous_commit off)" if "postgresql" in kinds else "")
        + ".",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
    sys.exit(130)

"""Control-plane benchmark: ``ringleader server`` on SQLite and on PostgreSQL, same run.

Every server is a real process on a loopback port with its own RINGLEADER_HOME
(and, for PostgreSQL, its own database on a throw-away PostgreSQL cluster from
Debian's package, started like the tests' fixture in tests/fixtures/postgres.py).
Five phases:

1. latency: a warm server runs the digits example as a PyTorch workload with
   numWorkers 1 (2 pods, 2 ranks). Measured from just before the POST, as a
   client sees it (polling every --poll-ms): all pods Running, the first optimizer
   step (rank 0 prints its wall-clock time; read back through the logs API) and
   Completed. The peer is the same command run directly with
   ``ringleader launch -n 2`` (wall time of the command; first step likewise).
   Runs alternate launch, SQLite server, PostgreSQL server, so drift hits all.
2. throughput: --submissions POSTs from --concurrency client threads against a
   fresh server per burst; submissions/s = accepted (202) / burst wall time.
   No workload may really run (hundreds of real gangs on this machine would
   measure the machine, not the API), so the server process is ``ringleader
   server``'s own code (bench_server.py's ``--serve``) in one of two modes:
   ``api``: the background loops are not started, so workloads stay Pending
   (what the API and the database sustain); ``held``: the loops run against a
   backend that accepts each workload at once and keeps its pods Pending, like
   a cluster with no free capacity, so admission and per-tick polling write to
   the database while the POSTs arrive.
3. listing: --rows finished workloads (Completed/Failed/Stopped, with their pods
   and events, so the loops never pick them up) are inserted straight into the
   database through the server's own models while the server is stopped; then
   ``GET /api/v1/workloads?limit=50`` (plain, with sortBy, with filterBy, with
   both; and /healthz, the HTTP floor) is timed sequentially, p50 and p99.
4. stalls: placement while stops hang (bench/control_plane_stalls.py).
5. abuse (bench/control_plane_abuse.py): the list's p99 while 16 threads flood
   POST /api/v1/token with a wrong secret, as a ratio to its quiet p99 in the
   same run; and the throughput phase's burst repeated with ~100 KB commands
   (``api_100kb``), next to its normal figure.

The client runs on the same machine as the server, the ranks and PostgreSQL:
on a 2-core machine they all share the cores. The machine may be shared with
other work: each sample waits for idle CPUs and is measured again while
processes this run did not start used CPU meanwhile (``clean``); a fixed loop
timed before each sample records the (virtual) CPU's speed. Writes
bench/results/control_plane.json
and bench/results/control_plane.md (not with --quick, a smoke run that only prints).

Usage: python bench/control_plane.py [--runs 7] [--submissions 500] [--rows 10000]
                                    [--flood-requests 200]
       python bench/control_plane.py --quick
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench_quiet import (
    CALIBRATION_MS,
    DROPPED,
    MARKER,
    OTHER_LOAD,
    QUIET,
    clean,
    code_version,
    machine_busy,
    nanmedian,
    percentile,
)
from bench_server import API, FINAL, Databases, Server
from control_plane_list import LIST_QUERIES, phase_list
from control_plane_report import markdown

RESULTS = Path(__file__).resolve().parent / "results"
FIRST = re.compile(r"RINGLEADER_BENCH first_step_unix=([0-9.]+)")
TARGET_OVERHEAD_S = 1.0
TARGET_SUBMISSIONS_PER_S = 200.0
TARGET_LIST_P99_MS = 50.0
TARGET_STALL_P99_S = 1.0
TARGET_FLOOD_RATIO = 1.5  # bench/control_plane_abuse.py's


# ----- the server process -----------------------------------------------------------


# ----- databases ----------------------------------------------------------------------


# ----- phase 1: latency -------------------------------------------------------------------


def first_step(text: str, started: float) -> float:
    match = FIRST.search(text)
    return float(match.group(1)) - started if match else math.nan


def run_launch(epochs: int) -> dict[str, float]:
    py = sys.executable
    argv = [py, "-m", "ringleader", "launch", "-n", "2", "--", py, *example(epochs)]
    started = time.time()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    ended = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"ringleader launch failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"first_step_s": first_step(proc.stdout, started), "completed_s": ended - started}


def example(epochs: int) -> list[str]:
    return ["-m", "ringleader.examples.digits", "--epochs", str(epochs), "--bench"]


def stamp(value: str | None, started: float) -> float:
    """Seconds from ``started`` to a server timestamp (same machine, same clock)."""
    if not value:
        return math.nan
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() - started


def run_workload(server: Server, name: str, epochs: int, poll_s: float) -> dict[str, float]:
    """Submit the example and follow it as a client would: pods, then the workload."""
    command = " ".join(["python", *example(epochs)])
    started = time.time()
    workload_id = server.submit(name, command)
    accepted = time.time()
    running = math.nan
    while True:
        pods = server.get(f"{API}/{workload_id}/pods")["pods"]
        phases = [p["status"] for p in pods]
        if pods and all(p == "Running" for p in phases):
            running = time.time() - started
            break
        if any(p in ("Succeeded", "Failed", "Stopped") for p in phases):
            break  # finished between two loop ticks: never seen all Running
        time.sleep(poll_s)
    while True:
        workload = server.get(f"{API}/{workload_id}")
        if workload["actualPhase"] in FINAL:
            completed = time.time() - started
            break
        time.sleep(poll_s)
    if workload["actualPhase"] != "Completed":
        raise RuntimeError(f"{name} ended {workload['actualPhase']}: {workload['phaseMessage']}")
    logs = server.request("GET", f"{API}/{workload_id}/logs").text
    pods = server.get(f"{API}/{workload_id}/pods")["pods"]
    events = server.get(f"{API}/{workload_id}/events")["events"]
    admitted = [e["time"] for e in events if e["toPhase"] == "Initializing"]
    # The detached supervisor's own record: when it started and when it wrote the end.
    state = json.loads((server.home / "runs" / workload_id / "state.json").read_text())
    return {
        "accepted_s": accepted - started,
        "all_running_s": running,
        "first_step_s": first_step(logs, started),
        "completed_s": completed,
        # The server's own stamps (when its loop noticed), free of our polling interval.
        "server_admitted_s": stamp(admitted[0] if admitted else None, started),
        "server_all_running_s": max(stamp(p["startedAt"], started) for p in pods),
        "server_completed_s": stamp(workload["completedAt"], started),
        "supervisor_started_s": float(state["started_at"]) - started,
        "supervisor_ended_s": float(state["updated_at"]) - started,
    }


def phase_latency(
    dbs: Databases, servers: list[Server], args: argparse.Namespace
) -> dict[str, Any]:
    peers: dict[str, Callable[[str], dict[str, float]]] = {
        "launch": lambda _name: run_launch(args.epochs)
    }
    for kind in dbs.kinds:
        home, url, _ = dbs.fresh(kind, "latency")
        server = Server(home, url)
        servers.append(server)
        server.start()
        peers[kind] = lambda name, s=server: run_workload(s, name, args.epochs, args.poll_ms / 1000)
    for name, peer in peers.items() if args.warm else ():
        peer("warm")  # page cache for torch's import; the servers' lazy imports and code paths
        print(f"latency: warmed {name}", flush=True)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in peers}
    failures: dict[str, list[str]] = {name: [] for name in peers}
    tag = iter(range(1_000_000))  # unique workload names across retries

    def one_round() -> dict[str, dict[str, float]]:
        results = {}
        for name, peer in peers.items():
            for _try in range(3):  # a failed run is recorded, not hidden, then retried
                try:
                    results[name] = peer(f"run-{next(tag)}")
                    break
                except RuntimeError as exc:
                    failures[name].append(str(exc)[-600:])
                    print(f"latency {name}: FAILED, retrying", flush=True)
            else:
                raise SystemExit(f"{name} failed 3 times in a row; see above")
        return results

    for i in range(args.runs):
        results, other = clean(f"latency run {i + 1}", one_round)
        for name, sample in results.items():
            samples[name].append(sample | {"other_cores": other})
            print(
                f"latency run {i + 1}/{args.runs} {name:10s} "
                + " ".join(f"{k} {v:.3f}" for k, v in sample.items()),
                flush=True,
            )
    for server in servers:
        server.stop()
    servers.clear()
    median = {
        name: {k: nanmedian([s[k] for s in runs]) for k in runs[0]}
        for name, runs in samples.items()
    }
    base = median["launch"]
    compare = {
        kind: {
            "completed_ratio_vs_launch": median[kind]["completed_s"] / base["completed_s"],
            "completed_overhead_s": median[kind]["completed_s"] - base["completed_s"],
            "first_step_overhead_s": median[kind]["first_step_s"] - base["first_step_s"],
        }
        for kind in dbs.kinds
    }
    return {
        "workload": f"ringleader.examples.digits --epochs {args.epochs}, PyTorch, numWorkers 1 "
        "(2 pods, 2 ranks, gloo); peer: ringleader launch -n 2 of the same command",
        "poll_ms": args.poll_ms,
        "median": median,
        "vs_launch": compare,
        "samples": samples,
        "failures": failures,
    }


# ----- phase 2: throughput ----------------------------------------------------------------


def burst(
    server: Server, count: int, concurrency: int, command: str = "python -c pass"
) -> dict[str, float]:
    """POST ``count`` workloads running ``command`` from ``concurrency`` threads; time it."""
    for i in range(10):  # warm the server's code paths (untimed)
        server.submit(f"warm-{i}", command)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    client = httpx.Client(base_url=server.url, headers=server.headers, limits=limits, timeout=120)
    bodies = [server.body(f"burst-{i}", command) for i in range(count)]

    def post(body: dict[str, Any]) -> tuple[int, float, str]:
        t = time.perf_counter()
        response = client.post(f"{API}/distributed", json=body)
        elapsed = time.perf_counter() - t
        return response.status_code, elapsed, "" if response.status_code == 202 else response.text

    with client, ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda _: client.get("/healthz"), range(concurrency)))  # open connections
        cpu, own, busy = server.cpu_s(), time.process_time(), machine_busy()
        started = time.perf_counter()
        results = list(pool.map(post, bodies))
        wall = time.perf_counter() - started
        cpu, own = server.cpu_s() - cpu, time.process_time() - own
        busy = [b - a for a, b in zip(busy, machine_busy(), strict=True)]
    accepted = [lat for status, lat, _ in results if status == 202]
    for status, _, text in [r for r in results if r[0] != 202][:3]:
        print(f"  a submission got {status}: {text[:300]}", flush=True)
    stored = server.get(f"{API}/count")["count"]
    if stored != len(accepted) + 10:
        raise RuntimeError(f"{len(accepted)} accepted + 10 warm-up but {stored} stored")
    return {
        "submissions_per_s": len(accepted) / wall,
        "post_p50_ms": percentile(accepted, 50) * 1000,
        "post_p99_ms": percentile(accepted, 99) * 1000,
        "server_cpu_ms_per_submission": cpu * 1000 / count,
        "client_cpu_ms_per_submission": own * 1000 / count,
        "machine_cpu_busy": busy[0] / busy[1] if busy[1] else math.nan,
        "errors": count - len(accepted),
        "wall_s": wall,
    }


def phase_throughput(
    dbs: Databases, servers: list[Server], args: argparse.Namespace
) -> dict[str, Any]:
    from control_plane_abuse import big_command

    # name -> (server mode, command, POSTs per burst): api_100kb is phase 5's big
    # submissions, fewer per burst (each costs the server far more than a plain one)
    modes = {
        "api": ("api", "python -c pass", args.submissions),
        "held": ("held", "python -c pass", args.submissions),
        "api_100kb": ("api", big_command(), args.big_submissions),
    }
    samples: dict[str, dict[str, list[dict[str, float]]]] = {}
    for kind in dbs.kinds:
        for mode, (server_mode, command, count) in modes.items():
            runs = samples.setdefault(kind, {}).setdefault(mode, [])
            for i in range(args.bursts):

                def fresh_burst(
                    kind: str = kind,
                    server_mode: str = server_mode,
                    command: str = command,
                    count: int = count,
                ) -> dict[str, float]:
                    home, url, _ = dbs.fresh(kind, f"submit-{server_mode}")
                    server = Server(home, url, server_mode)
                    servers.append(server)
                    server.start()
                    sample = burst(server, count, args.concurrency, command)
                    server.stop()
                    servers.remove(server)
                    return sample

                sample, other = clean(f"throughput {kind} {mode} burst {i + 1}", fresh_burst)
                sample["other_cores"] = other
                runs.append(sample)
                print(
                    f"throughput {kind} {mode} burst {i + 1}/{args.bursts}: "
                    + " ".join(f"{k} {v:.2f}" for k, v in sample.items()),
                    flush=True,
                )
    median = {
        kind: {
            mode: {k: statistics.median(s[k] for s in runs) for k in runs[0]}
            for mode, runs in modes.items()
        }
        for kind, modes in samples.items()
    }
    return {
        "submissions": args.submissions,
        "concurrency": args.concurrency,
        "big_submissions": args.big_submissions,
        "commands": {mode: f"{len(spec[1])} characters" for mode, spec in modes.items()},
        "bursts": args.bursts,
        "median": median,
        "samples": samples,
    }


# ----- phase 3: listing -------------------------------------------------------------------


# ----- numbers and report -----------------------------------------------------------------


def phase_stalls(dbs: Databases, servers: list[Server], args: argparse.Namespace) -> dict[str, Any]:
    """Placement while stops hang (bench/control_plane_stalls.py), on each database."""
    from control_plane_stalls import STOP_S_ENV, run_stalls

    out = {}
    for kind in dbs.kinds:
        home, url, _ = dbs.fresh(kind, "stalls")
        server = Server(home, url, "slowstop", env={STOP_S_ENV: str(args.stop_s)})
        servers.append(server)
        server.start()
        out[kind] = run_stalls(server, args.stalled, args.probes, args.stop_s)
        print(f"stalls {kind}: p99 {out[kind]['p99_s']:.3f} s", flush=True)
        server.stop()
    return out


def phase_flood(dbs: Databases, servers: list[Server], args: argparse.Namespace) -> dict[str, Any]:
    """The list's p99 under a wrong-secret token flood (bench/control_plane_abuse.py)."""
    from control_plane_abuse import list_under_flood

    out = {}
    for kind in dbs.kinds:
        home, url, _ = dbs.fresh(kind, "flood")
        server = Server(home, url, "api")  # loops off: the workloads stay Pending
        servers.append(server)
        server.start()
        for i in range(60):  # more than the page of 50
            server.submit(f"listed-{i}", "python -c pass")
        client_id = json.loads((home / "credentials.json").read_text())["clientId"]
        out[kind] = list_under_flood(server, client_id, args.flood_requests, percentile, clean)
        server.stop()
        servers.remove(server)
        flood = out[kind]
        print(
            f"flood {kind}: list p99 quiet {flood['quiet']['p99_ms']:.1f} ms, flooded "
            f"{flood['flooded']['p99_ms']:.1f} ms (x{flood['p99_ratio']:.2f}); flood answers "
            f"{flood['flood_answers']} at {flood['flood_answers_per_s']:.0f}/s",
            flush=True,
        )
    return out


# ----- main -----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="latency runs per peer (median)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs of the digits example")
    parser.add_argument("--poll-ms", type=int, default=50, help="client polling interval")
    parser.add_argument("--submissions", type=int, default=500, help="POSTs per burst")
    parser.add_argument("--concurrency", type=int, default=16, help="client threads")
    parser.add_argument(
        "--big-submissions", type=int, default=100, help="POSTs per burst of ~100 KB commands"
    )
    parser.add_argument("--bursts", type=int, default=3, help="bursts per database and mode")
    parser.add_argument("--rows", type=int, default=10_000, help="workloads in the DB to list")
    parser.add_argument("--requests", type=int, default=300, help="GETs per list query")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=120,
        help="seconds to wait at most, before each sample, for other work to leave the CPUs "
        "nearly idle (the machine may be shared; 0: never wait)",
    )
    parser.add_argument(
        "--tries",
        type=int,
        default=4,
        help="measure a sample again, up to this many times in all, while other processes "
        "used more than --max-other-cores meanwhile",
    )
    parser.add_argument("--max-other-cores", type=float, default=0.1, help="see --tries")
    parser.add_argument(
        "--databases",
        default="sqlite,postgresql",
        help="comma-separated: sqlite, postgresql (default both)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run (1 run of 1 epoch without warm-up, 40 submissions, 1 burst, "
        "10 of ~100 KB, 300 rows, 15 GETs, 15 GETs under the flood); writes nothing",
    )
    parser.add_argument("--stalled", type=int, default=20, help="stops in flight (stalls)")
    parser.add_argument("--stop-s", type=float, default=20.0, help="how long each stop takes")
    parser.add_argument("--probes", type=int, default=20, help="submissions timed (stalls)")
    parser.add_argument(
        "--flood-requests", type=int, default=200, help="GETs quiet and as many flooded"
    )
    args = parser.parse_args()
    if args.quick:
        args.runs, args.epochs, args.submissions, args.bursts = 1, 1, 40, 1
        args.rows, args.requests, args.quiet_wait, args.tries = 300, 15, 0, 1
        args.stalled, args.stop_s, args.probes = 2, 2.0, 2
        args.flood_requests, args.big_submissions = 15, 10
    args.warm = not args.quick
    QUIET.update(max_wait_s=args.quiet_wait, tries=args.tries, max_other_cores=args.max_other_cores)
    os.environ[MARKER] = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    kinds = [k.strip() for k in args.databases.split(",") if k.strip()]
    if not kinds or any(k not in ("sqlite", "postgresql") for k in kinds):
        parser.error("--databases takes sqlite and/or postgresql")

    # SIGTERM/SIGHUP end the run through the finally below, like Ctrl-C.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    tmp = Path(tempfile.mkdtemp(prefix="ringleader-bench-cp-"))
    dbs = Databases(tmp, kinds)
    servers: list[Server] = []
    try:
        dbs.start()
        report: dict[str, Any] = {
            "benchmark": "control_plane",
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
            },
            "databases": {k: dbs.version(k) for k in kinds},
            "code": code_version(),
            "args": vars(args),
        }
        report["phase_s"] = {}
        for name, phase in (
            ("latency", phase_latency),
            ("throughput", phase_throughput),
            ("list", phase_list),
            ("stalls", phase_stalls),
            ("flood", phase_flood),
        ):
            report.setdefault("loadavg_before", {})[name] = os.getloadavg()
            started = time.perf_counter()
            report[name] = phase(dbs, servers, args)
            report["phase_s"][name] = time.perf_counter() - started
            print(f"{name}: {report['phase_s'][name]:.1f} s", flush=True)
    finally:
        for server in servers:
            with contextlib.suppress(Exception):
                server.stop()
        dbs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    lat, thr, lst = report["latency"], report["throughput"], report["list"]
    report["other_work"] = {
        **QUIET,
        "samples": len(OTHER_LOAD),
        "kept_over_max": sum(x > QUIET["max_other_cores"] for x in OTHER_LOAD),
        "median_cores": statistics.median(OTHER_LOAD) if OTHER_LOAD else math.nan,
        "max_cores": max(OTHER_LOAD, default=math.nan),
        "calibration_ms": CALIBRATION_MS,
        "dropped": DROPPED,
    }
    report["targets"] = {
        "stalls_submit_to_running_p99_s_max": TARGET_STALL_P99_S,
        "completed_overhead_s_max": TARGET_OVERHEAD_S,
        "submissions_per_s_min": TARGET_SUBMISSIONS_PER_S,
        "list_p99_ms_max": TARGET_LIST_P99_MS,
        "list_p99_under_token_flood_ratio_max": TARGET_FLOOD_RATIO,
    }
    report["meets_targets"] = {
        kind: {
            "completed_overhead": lat["vs_launch"][kind]["completed_overhead_s"]
            < TARGET_OVERHEAD_S,
            "submissions_per_s": thr["median"][kind]["api"]["submissions_per_s"]
            >= TARGET_SUBMISSIONS_PER_S,
            "stalls_p99": report["stalls"][kind]["meets_target"],
            "list_p99_under_token_flood": report["flood"][kind]["meets_target"],
            "list_p99": all(
                lst["by_database"][kind]["queries"][name]["p99_ms"] < TARGET_LIST_P99_MS
                for name in LIST_QUERIES
            ),
        }
        for kind in kinds
    }
    table = markdown(report, kinds)
    if args.quick:
        print(table + "\n(--quick: a smoke run; results not written)")
        return 0
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "control_plane.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "control_plane.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

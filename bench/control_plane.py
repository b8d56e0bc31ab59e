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
   server``'s own code (``--serve`` below calls it) in one of two modes:
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
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
FIRST = re.compile(r"RINGLEADER_BENCH first_step_unix=([0-9.]+)")
TARGET_OVERHEAD_S = 1.0
TARGET_SUBMISSIONS_PER_S = 200.0
TARGET_LIST_P99_MS = 50.0
TARGET_STALL_P99_S = 1.0
TARGET_FLOOD_RATIO = 1.5  # bench/control_plane_abuse.py's
ACTIVE = ("Creating", "Pending", "Initializing", "Running", "Degraded", "Resuming", "Unknown")
FINAL = ("Completed", "Failed", "Stopped")
API = "/api/v1/workloads"
T = TypeVar("T")
# Query strings for phase 3, each a page of 50 (the server's default page size).
LIST_QUERIES: dict[str, dict[str, str]] = {
    "page": {"limit": "50"},
    "sortBy": {"limit": "50", "sortBy": "name", "sortOrder": "asc"},
    "filterBy": {"limit": "50", "filterBy": "phase==Failed"},
    "sortBy+filterBy": {
        "limit": "50",
        "sortBy": "name",
        "sortOrder": "asc",
        "filterBy": "phase==Failed",
    },
}


# ----- the server process -----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One control-plane process on its own home (and database), with an admin client.

    ``mode`` is ``real`` (``ringleader server``, local backend) or ``api`` / ``held``
    (this file's ``--serve``, see the module doc).
    """

    def __init__(
        self,
        home: Path,
        database_url: str | None,
        mode: str = "real",
        env: dict[str, str] | None = None,
    ) -> None:
        self.home = home
        self.extra_env = env or {}
        self.database_url = database_url
        self.mode = mode
        self.port = 0
        self.url = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.http: httpx.Client | None = None
        self.headers: dict[str, str] = {}
        self.project_id = ""

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        py = sys.executable
        if self.mode == "real":
            argv = [py, "-m", "ringleader", "server", "--port", str(self.port)]
            argv += ["--run-as", "server"]  # the venv's interpreter is root's alone here
        else:
            argv = [py, str(Path(__file__).resolve()), "--serve", self.mode, "--port"]
            argv.append(str(self.port))
        env = {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}
        env["RINGLEADER_HOME"] = str(self.home)
        env.update(self.extra_env)
        if self.database_url:
            env["RINGLEADER_DATABASE_URL"] = self.database_url
        with open(self.home / "server-bench.log", "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        from ringleader.connection import wait_healthy

        if not wait_healthy(self.url, self.proc, 60):
            raise RuntimeError(f"server did not start:\n{self.log_tail()}")
        creds = json.loads((self.home / "credentials.json").read_text())
        self.http = httpx.Client(base_url=self.url, timeout=60)
        response = self.http.post(
            "/api/v1/token",
            json={
                "grantType": "client_credentials",
                "clientID": creds["clientId"],
                "clientSecret": creds["clientSecret"],
            },
        )
        response.raise_for_status()
        self.headers = {"Authorization": f"Bearer {response.json()['accessToken']}"}
        self.project_id = self.get("/api/v1/org-unit/projects/default")["id"]

    def log_tail(self) -> str:
        path = self.home / "server-bench.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        assert self.http is not None
        return self.http.request(method, path, headers=self.headers, **kw)

    def get(self, path: str, **kw: Any) -> Any:
        response = self.request("GET", path, **kw)
        response.raise_for_status()
        return response.json()

    def submit(self, name: str, command: str) -> str:
        response = self.request("POST", f"{API}/distributed", json=self.body(name, command))
        if response.status_code != 202:
            raise RuntimeError(f"submit {name}: {response.status_code} {response.text}")
        return response.json()["workloadId"]

    def body(self, name: str, command: str) -> dict[str, Any]:
        return {
            "name": name,
            "projectId": self.project_id,
            "spec": {"command": command, "numWorkers": 1},
        }

    def cpu_s(self) -> float:
        """User + system CPU seconds the server process has used so far."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        """Cancel what still runs (through the API), stop the server, sweep leftovers."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if self.mode == "real" and self.http is not None:
                with contextlib.suppress(Exception):
                    self._delete_active()
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.http is not None:
            self.http.close()
            self.http = None
        self.proc = None
        self._sweep()

    def _delete_active(self, timeout_s: float = 60.0) -> None:
        """DELETE every unfinished workload and wait until the loops have cancelled it."""
        active = [
            w["workloadId"]
            for w in self.get(API, params={"limit": "500"})["workloads"]
            if w["actualPhase"] in (*ACTIVE, "Stopping", "Deleting")
        ]
        for workload_id in active:
            self.request("DELETE", f"{API}/distributed/{workload_id}")
        deadline = time.monotonic() + timeout_s
        while active and time.monotonic() < deadline:
            active = [w for w in active if self.request("GET", f"{API}/{w}").status_code == 200]
            time.sleep(0.1)

    def _sweep(self) -> None:
        """Kill any process still carrying the job id of a run this server started."""
        runs = self.home / "runs"
        if not runs.is_dir():
            return
        from ringleader.server.backends.local.processes import sweep_job

        for run_dir in runs.iterdir():
            sweep_job(f"rl-{run_dir.name}", grace_s=2.0)


# ----- databases ----------------------------------------------------------------------


class Databases:
    """Fresh stores on demand: a SQLite file per home, or a new PostgreSQL database."""

    def __init__(self, tmp: Path, kinds: list[str]) -> None:
        self.tmp = tmp
        self.kinds = kinds
        self.pg: Any = None
        self.count = 0

    def start(self) -> None:
        if "postgresql" not in self.kinds:
            return
        sys.path.insert(0, str(ROOT))  # the tests' fixture module knows how to run postgres
        from tests.fixtures.postgres import PostgresServer, postgres_bindir

        bindir = postgres_bindir()
        if bindir is None:
            raise SystemExit(
                "PostgreSQL server binaries are missing (apt: postgresql); "
                "install them or pass --databases sqlite"
            )
        self.pg = PostgresServer(bindir)
        self.pg.init()
        self.pg.start()

    def stop(self) -> None:
        if self.pg is not None:
            self.pg.stop()
            self.pg = None

    def fresh(self, kind: str, label: str) -> tuple[Path, str | None, str]:
        """(home, URL given to the server or None for its default, URL for direct access)."""
        self.count += 1
        home = self.tmp / f"{kind}-{label}-{self.count}"
        if kind == "sqlite":
            return home, None, f"sqlite:///{home / 'ringleader.db'}"
        name = f"bench_{label.replace('-', '_')}_{self.count}_{uuid.uuid4().hex[:6]}"
        self.pg.admin(f'CREATE DATABASE "{name}"')
        url = self.pg.url(name)
        return home, url, url

    def version(self, kind: str) -> str:
        if kind == "sqlite":
            import sqlite3

            return f"SQLite {sqlite3.sqlite_version}"
        return f"PostgreSQL {self.pg.bindir.parent.name} (fsync off, synchronous_commit off)"


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


def seed(url: str, rows: int) -> dict[str, int]:
    """Insert ``rows`` finished workloads with pods and events, through the server's models.

    Finished phases only (Completed/Failed/Stopped): the loops never select them.
    """
    from sqlalchemy import insert, select

    from ringleader.server.db import make_engine, utcnow
    from ringleader.server.models import Event, Pod, Project, User, Workload, new_id
    from ringleader.spec import SPEC_VERSION, WorkloadSpec

    rng = random.Random(0)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            admin = conn.scalar(select(User.id).where(User.name == "admin"))
            project = conn.scalar(select(Project.id).where(Project.name == "default"))
            template = WorkloadSpec.model_validate(
                {
                    "name": "x",
                    "projectId": project,
                    "spec": {"command": "python train.py --epochs 10", "numWorkers": 1},
                }
            ).model_dump(mode="json", by_alias=True, exclude_none=True)
            now = utcnow()
            workloads, pods, events = [], [], []
            for i in range(rows):
                workload_id, name = new_id(), f"seeded-{rng.randrange(16**6):06x}-{i}"
                phase = rng.choices(FINAL, weights=(7, 2, 1))[0]
                created = now - timedelta(minutes=rows - i)
                started = created + timedelta(seconds=rng.uniform(1, 30))
                ended = started + timedelta(seconds=rng.uniform(30, 3600))
                workloads.append(
                    {
                        "id": workload_id,
                        "name": name,
                        "project_id": project,
                        "created_by": admin,
                        "spec": {**template, "name": name},
                        "spec_version": SPEC_VERSION,
                        "framework": "PyTorch",
                        "desired_phase": "Stopped" if phase == "Stopped" else "Running",
                        "phase": phase,
                        "phase_reason": phase,
                        "phase_message": "",
                        "backend": "local",
                        "handle": f"/var/lib/ringleader/runs/{workload_id}",
                        "attempt": 0,
                        "created_at": created,
                        "started_at": started,
                        "completed_at": ended,
                        "updated_at": ended,
                        "deleted_at": None,
                    }
                )
                pod_phase = {"Completed": "Succeeded", "Failed": "Failed", "Stopped": "Stopped"}
                for index, role in enumerate(("master", "worker")):
                    pods.append(
                        {
                            "id": new_id(),
                            "workload_id": workload_id,
                            "name": f"{name}-{role}-0",
                            "role": role,
                            "index": 0,
                            "node": "localhost",
                            "phase": pod_phase[phase],
                            "exit_code": {"Completed": 0, "Failed": 1, "Stopped": -15}[phase],
                            "attempt": 0,
                            "ranks": [index],
                            "created_at": started,
                            "started_at": started,
                            "completed_at": ended,
                            "updated_at": ended,
                        }
                    )
                moves = [("Creating", "Pending"), ("Pending", "Initializing")]
                moves += [("Initializing", "Running"), ("Running", phase)]
                events.append(
                    {"workload_id": workload_id, "time": created, "type": "Submitted"}
                    | {"reason": "", "message": "submitted by admin", "pod_name": None}
                    | {"from_phase": None, "to_phase": None}
                )
                for before, after in moves:
                    events.append(
                        {"workload_id": workload_id, "time": started, "type": "PhaseChanged"}
                        | {"reason": after, "message": "", "pod_name": None}
                        | {"from_phase": before, "to_phase": after}
                    )
            conn.execute(insert(Workload), workloads)
            conn.execute(insert(Pod), pods)
            conn.execute(insert(Event), events)
        if engine.dialect.name == "postgresql":
            with engine.connect() as conn:  # what autovacuum does soon after a bulk load
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    finally:
        engine.dispose()
    return {"workloads": len(workloads), "pods": len(pods), "events": len(events)}


def phase_list(dbs: Databases, servers: list[Server], args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for kind in dbs.kinds:
        home, url, direct = dbs.fresh(kind, "list")
        server = Server(home, url)
        servers.append(server)
        server.start()  # migrations, admin, default project
        server.stop()
        started = time.perf_counter()
        counts = seed(direct, args.rows)
        seeded_s = time.perf_counter() - started
        server.start()
        total = server.get(f"{API}/count")["count"]
        if total != args.rows:
            raise RuntimeError(f"seeded {args.rows} workloads, the server counts {total}")
        latencies: dict[str, list[float]] = {name: [] for name in [*LIST_QUERIES, "healthz"]}

        def chunk(n: int, server: Server = server) -> dict[str, list[float]]:
            """``n`` rounds of the queries, interleaved; milliseconds per query."""
            got: dict[str, list[float]] = {name: [] for name in [*LIST_QUERIES, "healthz"]}
            for _ in range(n):
                t = time.perf_counter()
                server.request("GET", "/healthz").raise_for_status()
                got["healthz"].append((time.perf_counter() - t) * 1000)
                for name, params in LIST_QUERIES.items():
                    t = time.perf_counter()
                    response = server.request("GET", API, params=params)
                    elapsed = time.perf_counter() - t
                    if response.status_code != 200 or len(response.json()["workloads"]) != 50:
                        raise RuntimeError(f"GET {params}: {response.status_code} {response.text}")
                    got[name].append(elapsed * 1000)
            return got

        chunk(10)  # warm-up
        chunk_loads = []
        for first in range(0, args.requests, 50):
            n = min(50, args.requests - first)
            got, other = clean(f"list {kind}", lambda n=n: chunk(n))
            chunk_loads.append(other)
            for name, values in got.items():
                latencies[name] += values
        server.stop()
        servers.remove(server)
        results[kind] = {
            "seeded": counts,
            "healthz_is_the_floor": "GET /healthz, no auth, no database: HTTP alone",
            "seed_s": seeded_s,
            "other_cores_per_chunk_of_50": chunk_loads,
            "queries": {
                name: {
                    "params": LIST_QUERIES.get(name, {}),
                    "p50_ms": percentile(lat, 50),
                    "p99_ms": percentile(lat, 99),
                    "mean_ms": statistics.fmean(lat),
                    "max_ms": max(lat),
                }
                for name, lat in latencies.items()
            },
        }
        print(
            f"list {kind}: "
            + " ".join(
                f"{n} p50 {q['p50_ms']:.1f} p99 {q['p99_ms']:.1f} ms"
                for n, q in results[kind]["queries"].items()
            ),
            flush=True,
        )
    return {"rows": args.rows, "requests_per_query": args.requests, "by_database": results}


# ----- numbers and report -----------------------------------------------------------------


def code_version() -> dict[str, Any]:
    """The commit measured, and the files of src/ that differ from it (others may be editing)."""

    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD"),
        "uncommitted_in_src": git("status", "--porcelain", "--", "src").splitlines(),
    }


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (p99 of 300 samples is the 297th smallest)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs so far, from /proc/stat."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


# What counts as a quiet machine, and how hard to try for one (set from the flags).
QUIET = {"max_wait_s": 0.0, "idle_below": 0.2, "max_other_cores": 0.1, "tries": 1}
OTHER_LOAD: list[float] = []  # other work's CPU (cores) during each kept sample
CALIBRATION_MS: list[float] = []  # a fixed pure-Python loop, timed before each kept sample
DROPPED: list[dict[str, Any]] = []  # samples measured again because other work ran meanwhile
MARKER = "CONTROL_PLANE_BENCH_RUN"  # in the environment of every process this run starts
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_OURS: dict[tuple[int, int], bool] = {}


def wait_quiet(what: str) -> float:
    """Wait (at most ``QUIET["max_wait_s"]``) until the CPUs are nearly idle; busy fraction."""
    if QUIET["max_wait_s"] <= 0:
        return math.nan  # not waiting (--quick)
    deadline = time.monotonic() + QUIET["max_wait_s"]
    told = 0.0
    while True:
        before = machine_busy()
        time.sleep(1)
        after = machine_busy()
        busy = (after[0] - before[0]) / max(after[1] - before[1], 1)
        if busy < QUIET["idle_below"] or time.monotonic() > deadline:
            return busy
        if time.monotonic() - told > 15:
            told = time.monotonic()
            print(f"{what}: the machine is {busy:.0%} busy with other work; waiting", flush=True)


def other_cpu() -> dict[int, tuple[int, int]]:
    """pid -> (start time, CPU ticks incl. reaped children) of processes that are not ours.

    Ours carry MARKER in their environment (the servers, their supervisors and
    ranks, the launch peer and the postmaster inherit it) or descend from one
    that does (PostgreSQL's backends overwrite theirs with their titles). This
    process is ours too (its /proc environ predates MARKER), and pid 1 is left
    out: it reaps our detached supervisors when they end.
    """
    mark = f"{MARKER}={os.environ.get(MARKER, '')}".encode()
    stats: dict[int, tuple[int, int, int]] = {}  # pid -> (parent, start, cpu)
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fields = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            cpu = sum(int(x) for x in fields[11:15])
            stats[int(entry.name)] = (int(fields[1]), int(fields[19]), cpu)

    def ours(pid: int) -> bool:
        if pid in (0, 1) or pid not in stats:
            return False
        key = (pid, stats[pid][1])
        if key not in _OURS:
            try:
                _OURS[key] = mark in Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                _OURS[key] = False
            _OURS[key] = _OURS[key] or ours(stats[pid][0])
        return _OURS[key]

    me = os.getpid()
    return {
        pid: (start, cpu)
        for pid, (_parent, start, cpu) in stats.items()
        if pid not in (1, me) and not ours(pid)
    }


class OtherWork:
    """Cores' worth of CPU that other processes used from creation to ``cores()``.

    A process that starts and ends in between, with no parent of its own
    left to reap it, is missed: this flags interference, it cannot subtract it.
    """

    def __init__(self) -> None:
        self.since = time.monotonic()
        self.since_boot_ticks = float(Path("/proc/uptime").read_text().split()[0]) * CLOCK_TICKS
        self.before = other_cpu()

    def cores(self) -> float:
        ticks = 0
        for pid, (start, cpu) in other_cpu().items():
            previous = self.before.get(pid)
            if previous is not None and previous[0] == start:
                ticks += cpu - previous[1]
            elif start >= self.since_boot_ticks:
                ticks += cpu
        return ticks / CLOCK_TICKS / max(time.monotonic() - self.since, 1e-6)


def calibrate() -> float:
    """Milliseconds for a fixed pure-Python loop: how fast this (virtual) CPU is right now.

    Other VMs on the same host can slow every process here alike, which no
    look at this machine's processes shows; this makes such periods visible.
    """
    started = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i * i
    return (time.perf_counter() - started) * 1000


def clean(what: str, measure: Callable[[], T]) -> tuple[T, float]:
    """``measure()`` on a machine that other work left alone, as far as can be seen.

    Waits for idle CPUs, measures, and measures again (at most ``QUIET["tries"]``
    times in all) while other processes used more than ``QUIET["max_other_cores"]``
    meanwhile; returns the result and that load (the last try is kept, load and all).
    """
    for attempt in range(int(QUIET["tries"])):
        wait_quiet(what)
        speed = calibrate()
        meter = OtherWork()
        result = measure()
        other = meter.cores()
        if other <= QUIET["max_other_cores"] or attempt == QUIET["tries"] - 1:
            OTHER_LOAD.append(other)
            CALIBRATION_MS.append(speed)
            return result, other
        DROPPED.append({"what": what, "other_cores": other})
        print(f"{what}: other work used {other:.2f} cores meanwhile; measuring again", flush=True)
    raise AssertionError("unreachable")


def nanmedian(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return statistics.median(kept) if kept else math.nan


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


def markdown(report: dict[str, Any], kinds: list[str]) -> str:
    names = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    lat, thr, lst = report["latency"], report["throughput"], report["list"]
    other = report["other_work"]
    med, cmp_ = lat["median"], lat["vs_launch"]
    launch = med["launch"]
    cols = " | ".join(names[k] for k in kinds)
    lines = [
        "# Control-plane benchmark: ringleader server on SQLite and PostgreSQL",
        "",
        f"{report['date']}; commit {report['code']['commit'][:7]}"
        + (
            f" with uncommitted changes in {len(report['code']['uncommitted_in_src'])} "
            "file(s) of src/ (see the JSON)"
            if report["code"]["uncommitted_in_src"]
            else ""
        )
        + f"; {report['machine']['cpus']} CPUs; server, client, ranks and PostgreSQL share "
        "them. " + "; ".join(report["databases"].values()) + ".",
        "",
        f"| metric | {cols} | peer: `ringleader launch -n 2` | target |",
        "|---|" + "---|" * len(kinds) + "---|---|",
    ]

    def row(metric: str, values: list[str], peer: str = "", target: str = "") -> None:
        lines.append(f"| {metric} | {' | '.join(values)} | {peer} | {target} |")

    def each(fn: Callable[[str], str]) -> list[str]:
        return [fn(k) for k in kinds]

    row("submit -> all pods Running (s)", each(lambda k: f"{med[k]['all_running_s']:.3f}"))
    row(
        "submit -> first optimizer step (s)",
        each(lambda k: f"{med[k]['first_step_s']:.3f}"),
        f"{launch['first_step_s']:.3f}",
    )
    row(
        "submit -> Completed, end to end (s)",
        each(lambda k: f"{med[k]['completed_s']:.3f}"),
        f"{launch['completed_s']:.3f} (wall time)",
    )
    row(
        "end-to-end ratio vs launch",
        each(lambda k: f"{cmp_[k]['completed_ratio_vs_launch']:.3f}"),
        "1",
    )
    row(
        "end-to-end control-plane overhead (s)",
        each(lambda k: f"{cmp_[k]['completed_overhead_s']:+.3f}"),
        "",
        f"< {TARGET_OVERHEAD_S:g}",
    )
    tmed = thr["median"]
    row(
        "submissions/s, API only (loops not started)",
        each(lambda k: f"{tmed[k]['api']['submissions_per_s']:.0f}"),
        "",
        f">= {TARGET_SUBMISSIONS_PER_S:g}",
    )
    row(
        "submissions/s, loops on (held backend)",
        each(lambda k: f"{tmed[k]['held']['submissions_per_s']:.0f}"),
    )

    def big(kind: str) -> str:
        rate, plain = (tmed[kind][m]["submissions_per_s"] for m in ("api_100kb", "api"))
        return f"{rate:.0f} ({rate / plain:.2f}x)" if plain else f"{rate:.0f}"

    row("submissions/s, API only, ~100 KB commands (x plain)", each(big))
    for mode, label in (("api", "API only"), ("held", "loops on")):
        row(
            f"POST latency p50 / p99 (ms), {label}",
            each(
                lambda k, m=mode: (
                    f"{tmed[k][m]['post_p50_ms']:.0f} / {tmed[k][m]['post_p99_ms']:.0f}"
                )
            ),
        )
        row(
            f"server CPU per submission (ms), {label}",
            each(lambda k, m=mode: f"{tmed[k][m]['server_cpu_ms_per_submission']:.1f}"),
        )
    for name, params in LIST_QUERIES.items():
        query = "&".join(f"{k}={v}" for k, v in params.items())
        row(
            f"GET `?{query}` p50 / p99 (ms)",
            each(
                lambda k, n=name: (
                    f"{lst['by_database'][k]['queries'][n]['p50_ms']:.1f} / "
                    f"{lst['by_database'][k]['queries'][n]['p99_ms']:.1f}"
                )
            ),
            "",
            f"p99 < {TARGET_LIST_P99_MS:g}",
        )
    stalls = report["stalls"]
    first = stalls[kinds[0]]
    row(
        f"submit -> Running p50 / p99 (s) while {first['stalled']} stops of "
        f"{first['stop_s']:g} s each hang (stub backend)",
        each(lambda k: f"{stalls[k]['p50_s']:.3f} / {stalls[k]['p99_s']:.3f}"),
        "",
        f"p99 < {TARGET_STALL_P99_S:g}",
    )
    flood = report["flood"]
    row(
        f"GET `?limit=50` p99 (ms): quiet / under a {flood[kinds[0]]['threads']}-thread "
        "wrong-secret token flood (ratio)",
        each(
            lambda k: (
                f"{flood[k]['quiet']['p99_ms']:.1f} / {flood[k]['flooded']['p99_ms']:.1f} "
                f"({flood[k]['p99_ratio']:.2f}x)"
            )
        ),
        "",
        f"ratio <= {TARGET_FLOOD_RATIO:g}",
    )
    row(
        "GET `/healthz` p50 / p99 (ms): HTTP alone, the floor",
        each(
            lambda k: (
                f"{lst['by_database'][k]['queries']['healthz']['p50_ms']:.1f} / "
                f"{lst['by_database'][k]['queries']['healthz']['p99_ms']:.1f}"
            )
        ),
    )
    lines += [
        "",
        "Notes:",
        "",
        f"- Latency: {lat['workload']}; median of {report['args']['runs']} runs, alternating "
        "launch / "
        + " / ".join(names[k] for k in kinds)
        + " server, "
        + ("after one untimed run each (warm servers). " if report["args"]["warm"] else "cold. ")
        + "Times are from just before the POST, as a client polling every "
        f"{lat['poll_ms']} ms sees them; the loops' own stamps are in the JSON.",
        f"- Submissions: {thr['submissions']} POSTs from {thr['concurrency']} client threads "
        f"(httpx, keep-alive) on a fresh server and database per burst, median of "
        f"{thr['bursts']} bursts; every accepted workload is checked to be in the database. "
        "No workload runs: *API only* is the real app with its background loops not started "
        "(workloads stay Pending); *loops on* runs the loops against a backend that accepts "
        "each workload at once and keeps its pods Pending (a full cluster), so admission and "
        "per-tick polling write to the database during the burst.",
        "- Stalls: a server whose stub backend starts every workload at once (pods Running) "
        f"and takes {report['stalls'][kinds[0]]['stop_s']:g} s for each stop; "
        f"{report['stalls'][kinds[0]]['stalled']} workloads are deleted together, then "
        f"{report['stalls'][kinds[0]]['probes']} submissions are timed one by one from the POST "
        "until the API shows them Running (10 ms polling) while those stops are in flight.",
        f"- Big submissions: bursts of {thr['big_submissions']} POSTs, otherwise the same, "
        f"with a command of {thr['commands']['api_100kb']} (`python -c` of a long string "
        "literal), API only.",
        f"- Token flood: a server (loops off) with 60 Pending workloads; "
        f"{flood[kinds[0]]['requests_each']} sequential `GET ?limit=50` quiet and as many while "
        f"{flood[kinds[0]]['threads']} threads in another process POST /api/v1/token with the "
        "admin's client id and a wrong secret, interleaved in chunks of 25 (the flood flowing "
        "before a flooded chunk, gone before a quiet one). Flood answers: "
        + "; ".join(
            f"{names[k]} {flood[k]['flood_answers']} at {flood[k]['flood_answers_per_s']:.0f}/s"
            for k in kinds
        )
        + ". The flooding client shares the machine's cores with the server.",
        f"- Listing: {lst['rows']} finished workloads (Completed/Failed/Stopped, 2 pods and 5 "
        "events each) inserted through the server's models while it was stopped (PostgreSQL "
        f"then ANALYZEd); {lst['requests_per_query']} sequential requests per query, "
        "interleaved, after 10 warm-up requests each.",
        f"- Shared machine: each sample (a latency round, a burst, 50 rounds of GETs) waited "
        f"(at most {other['max_wait_s']:g} s) for idle CPUs and was measured again, up to "
        f"{other['tries']} times, while processes not started by the benchmark used more than "
        f"{other['max_other_cores']:g} cores meanwhile: {len(other['dropped'])} dropped, "
        f"{other['kept_over_max']} of {other['samples']} kept above that; other work during "
        f"kept samples: median {other['median_cores']:.2f}, max {other['max_cores']:.2f} cores. "
        "A fixed pure-Python loop took "
        f"{statistics.median(other['calibration_ms']):.0f} ms (median; min "
        f"{min(other['calibration_ms']):.0f}, max {max(other['calibration_ms']):.0f}) "
        "before the samples: the CPU's own speed varies on this VM.",
        "",
    ]
    return "\n".join(lines)


# ----- the --serve mode (runs inside the server process) ------------------------------


def held_backend() -> Any:
    """A backend that accepts every workload at once and never runs it: its pods
    stay Pending (a full cluster)."""
    from ringleader.server.backends.base import Backend, BackendStatus, Capabilities

    class HeldBackend(Backend):
        name = "held"
        capabilities = Capabilities(multi_node=True)

        def plan(self, request: Any) -> Any:
            return request

        def submit(self, plan: Any) -> str:
            return f"held:{plan.workload_id}"

        def poll(self, handle: str) -> Any:
            return BackendStatus("Initializing", message="held by the benchmark")

        def is_live(self, handle: str) -> bool:
            return False

        def stop(self, handle: str) -> None:
            return None

        def logs(self, handle: str, pod: str | None = None, tail: int | None = None) -> Any:
            return iter(())

    return HeldBackend()


def serve(mode: str, port: int) -> None:
    """``ringleader server --port PORT``'s own code: the background work off (``api``),
    or against a held backend (``held``) or a stub whose stops hang (``slowstop``)."""
    from control_plane_stalls import SlowStopBackend
    from ringleader.cli.server import serve as run_server
    from ringleader.server.config import ServerConfig

    config = ServerConfig(host="127.0.0.1", port=port, background=mode != "api", run_as="server")
    backend = {"api": None, "held": held_backend, "slowstop": SlowStopBackend}[mode]
    run_server(config, backend() if backend else None)


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
        help="smoke run (1 run of 1 epoch without warm-up, 100 submissions, 1 burst, "
        "30 of ~100 KB, 1000 rows, 30 GETs, 25 GETs under the flood); writes nothing",
    )
    parser.add_argument("--stalled", type=int, default=20, help="stops in flight (stalls)")
    parser.add_argument("--stop-s", type=float, default=20.0, help="how long each stop takes")
    parser.add_argument("--probes", type=int, default=20, help="submissions timed (stalls)")
    parser.add_argument(
        "--flood-requests", type=int, default=200, help="GETs quiet and as many flooded"
    )
    parser.add_argument("--serve", choices=("api", "held", "slowstop"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return 0
    if args.quick:
        args.runs, args.epochs, args.submissions, args.bursts = 1, 1, 100, 1
        args.rows, args.requests, args.quiet_wait, args.tries = 1000, 30, 0, 1
        args.stalled, args.stop_s, args.probes = 3, 3.0, 3
        args.flood_requests, args.big_submissions = 25, 30
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
            "args": {k: v for k, v in vars(args).items() if k not in ("serve", "port")},
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

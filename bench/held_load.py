"""Load held (issue 27, item 6): 1,000 open ``logs?follow`` streams and 200 web UI
live-refresh clients while submissions arrive at 200/s; ``/healthz`` p50/p99 and every
error, and the server's peak memory.

The server is ``ringleader server``'s own code (``cli.server.serve``: the REST API,
the web UI, admission, the scheduler and the reconciler loops all on) in a process of
its own, against a stub backend (``Chatty``) that runs nothing: each workload is
Running at once; a ``follow-*`` workload runs until the benchmark ends and its master
pod prints a line a second; every other one completes after --run-s seconds. So the
server does all of its own work (placement, polls, log reads, phase writes) and the
machine's two cores are not spent on training processes.

Who: the follows belong to --follow-users users (members of the project), 8 streams
each: the server's default ``--max-follows-per-user`` (8) stays in force, as on a
shared server. Each UI client is a session of its own (a cookie), 10 per UI user;
submissions come from the admin on 8 tokens. Tokens are written into the database
before the server starts (a login per client would time 300 PBKDF2 checks instead).

Clients (each its own process, so that a busy client loop never delays another's
clocks): ``follows`` opens the streams (GET /api/v1/workloads/ID/logs?follow=true,
what ``ringleader logs -f`` reads) over --targets workloads and keeps them open;
``ui`` does what the workloads page's script does: GET /workloads once, then GET
/workloads/live?version=...&have=... 2 s after each answer (static/app.js ``poll``);
``submit`` POSTs /api/v1/workloads/distributed every 1/--rate s (open loop: a slow
answer does not slow the next POST; at most --in-flight at once), each with an
``Idempotency-Key``; ``probe`` GETs /healthz every 20 ms, one at a time. A request
whose connection the server closed as it went out (a keep-alive connection ended
just as the client reused it) is sent again as the real clients do: a submission
after 0.5 s and 1 s with its key (the ringleader client), a GET once at once (a
browser); the resends are counted, and an error is what still failed. The window
measured starts once every stream is open and lasts --duration s. The server's RSS is
read from /proc every 0.5 s.

Writes bench/results/held_load.json and .md (not with --quick).

Usage: python bench/held_load.py [--databases sqlite,postgresql] [--duration 60]
       python bench/held_load.py --quick
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import httpx

from bench_quiet import code_version, percentile
from bench_server import API, ROOT, Databases, Server, free_port
from held_load_clients import FOLLOWS_PER_USER, ROLES, run_role

RESULTS = ROOT / "bench" / "results"
TARGET_HEALTHZ_P99_MS = 100.0


# ----- the server's side -----------------------------------------------------------------


def chatty_backend(run_s: float) -> Any:
    """A backend that runs nothing: Running at once, a line a second from each master."""
    from ringleader.server.backends.base import (
        Backend,
        BackendRequest,
        BackendStatus,
        Capabilities,
        LogLine,
        PodStatus,
    )

    class Chatty(Backend):
        name: ClassVar[str] = "chatty"
        capabilities: ClassVar[Capabilities] = Capabilities(multi_node=True)
        STATES: ClassVar[dict[str, str]] = {"up": "Running", "done": "Completed"}

        def __init__(self) -> None:
            self.runs: dict[str, tuple[BackendRequest, float]] = {}
            self.lock = threading.Lock()

        def plan(self, request: BackendRequest) -> BackendRequest:
            return request

        def submit(self, plan: BackendRequest) -> str:
            handle = f"chatty:{plan.workload_id}:{plan.attempt_offset}"
            with self.lock:
                self.runs[handle] = (plan, time.time())
            return handle

        def _state(self, handle: str) -> tuple[BackendRequest, float, bool]:
            with self.lock:
                request, began = self.runs[handle]
            done = not request.name.startswith("follow-") and time.time() - began > run_s
            return request, began, done

        def poll(self, handle: str) -> BackendStatus:
            request, _began, done = self._state(handle)
            pods = [
                PodStatus(name, role, index, "Succeeded" if done else "Running", "stub")
                for name, role, index in request.spec.pod_layout(request.name)
            ]
            if done:
                return BackendStatus("Completed", pods=pods, exit_code=0)
            return BackendStatus("Running", pods=pods)

        def is_live(self, handle: str) -> bool:
            with self.lock:
                return handle in self.runs and not self._state(handle)[2]

        def stop(self, handle: str) -> None:
            with self.lock:
                self.runs.pop(handle, None)

        def logs(
            self, handle: str, pod: str | None = None, tail: int | None = None
        ) -> Iterator[LogLine]:
            with self.lock:
                if handle not in self.runs:
                    return iter(())
                request, began = self.runs[handle]
            master = f"{request.name}-master-0"
            if pod not in (None, master):
                return iter(())
            count = int(time.time() - began)
            first = max(0, count - tail) if tail else 0
            return (
                LogLine(master, 0, "stdout", f"step {i} loss {1 / (i + 1):.4f}", began + i)
                for i in range(first, count)
            )

    return Chatty()


def serve(port: int, run_s: float) -> None:
    """The server's code with the stub backend (``python held_load.py --serve PORT``)."""
    from ringleader.cli.server import serve as run_server
    from ringleader.server.config import ServerConfig

    config = ServerConfig(host="127.0.0.1", port=port, run_as="server")
    run_server(config, chatty_backend(run_s))


class HeldServer(Server):
    """bench_server's Server, started as this file's ``--serve``."""

    def __init__(self, home: Path, database_url: str | None, run_s: float) -> None:
        super().__init__(home, database_url, mode="api")
        self.run_s = run_s

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve", str(self.port)]
        argv += ["--run-s", str(self.run_s)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}
        env["RINGLEADER_HOME"] = str(self.home)
        if self.database_url:
            env["RINGLEADER_DATABASE_URL"] = self.database_url
        with open(self.home / "server-bench.log", "ab") as log:
            self.proc = subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True,
            )  # fmt: skip
        from ringleader.connection import wait_healthy

        if not wait_healthy(self.url, self.proc, 60):
            raise RuntimeError(f"server did not start:\n{self.log_tail()}")
        super_start_client(self)  # (mode "api": stop() deletes nothing; nothing runs)


def super_start_client(server: Server) -> None:
    """The admin's client of ``Server.start`` (token, default project)."""
    creds = json.loads((server.home / "credentials.json").read_text())
    server.http = httpx.Client(base_url=server.url, timeout=60)
    answer = server.http.post(
        "/api/v1/token",
        json={
            "grantType": "client_credentials",
            "clientID": creds["clientId"],
            "clientSecret": creds["clientSecret"],
        },
    )
    answer.raise_for_status()
    server.headers = {"Authorization": f"Bearer {answer.json()['accessToken']}"}
    server.project_id = server.get("/api/v1/org-unit/projects/default")["id"]


def mint(url: str, follow_users: int, ui_clients: int, submitters: int) -> dict[str, list[str]]:
    """Users (members of ``default``) and their bearer tokens, written into the database."""
    from sqlalchemy import select

    from ringleader.server.auth import token_digest
    from ringleader.server.db import make_engine, utcnow
    from ringleader.server.models import Project, ProjectMember, Token, User, new_id

    engine = make_engine(url)
    tokens: dict[str, list[str]] = {"follow": [], "ui": [], "submit": []}
    try:
        with engine.begin() as conn:
            project = conn.scalar(select(Project.id).where(Project.name == "default"))
            admin = conn.scalar(select(User.id).where(User.name == "admin"))
            now = utcnow()
            users, members, rows = [], [], []

            def token(user: str, kind: str) -> None:
                value = secrets.token_urlsafe(32)
                tokens[kind].append(value)
                rows.append(
                    {"id": new_id(), "user_id": user, "token_hash": token_digest(value)}
                    | {"created_at": now, "expires_at": now + timedelta(days=1)}
                )

            for kind, count in (("follow", follow_users), ("ui", -(-ui_clients // 10))):
                for i in range(count):
                    user = new_id()
                    users.append({"id": user, "name": f"{kind}-{i:03d}", "created_at": now})
                    users[-1] |= {"is_admin": False}
                    members.append({"project_id": project, "user_id": user})
                    for _ in range(1 if kind == "follow" else 10):
                        if kind == "follow" or len(tokens["ui"]) < ui_clients:
                            token(user, kind)
            for _ in range(submitters):
                token(admin, "submit")
            conn.execute(User.__table__.insert(), users)
            conn.execute(ProjectMember.__table__.insert(), members)
            conn.execute(Token.__table__.insert(), rows)
    finally:
        engine.dispose()
    return tokens


# ----- one database ---------------------------------------------------------------------


class Memory:
    """The server process's resident memory, read from /proc every 0.5 s."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, int]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(0.5):
            with contextlib.suppress(OSError, ValueError):
                status = Path(f"/proc/{self.pid}/status").read_text()
                rss = int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]
                self.samples.append((time.time(), rss * 1024))

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


def measure(dbs: Databases, kind: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from control_plane_list import seed

    home, url, direct = dbs.fresh(kind, "held")
    server = HeldServer(home, url, args.run_s)
    try:
        server.start()  # migrations, the admin, the default project
        server.stop()
        seeded = seed(direct, args.rows) if args.rows else {}
        follow_users = -(-args.follows // FOLLOWS_PER_USER)
        tokens = mint(direct, follow_users, args.ui_clients, 8)
        server.start()
        assert server.proc is not None
        memory = Memory(server.proc.pid)
        targets = []
        for i in range(args.targets):
            body = server.body(f"follow-{i:03d}", "python train.py")
            answer = server.request("POST", f"{API}/distributed", json=body)
            answer.raise_for_status()
            targets.append(answer.json()["workloadId"])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            phases = {server.get(f"{API}/{t}")["actualPhase"] for t in targets}
            if phases == {"Running"}:
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"the followed workloads did not all start: {phases}")
        rss_before = memory.samples[-1][1] if memory.samples else 0
        t_start = time.time() + args.follows * 0.02 + 10
        t_end = t_start + args.duration
        common = {"url": server.url, "t_start": t_start, "t_end": t_end}
        jobs = {
            "follows": common | {"tokens": tokens["follow"], "targets": targets}
            | {"follows": args.follows},
            "ui": common | {"tokens": tokens["ui"]},
            "submit": common | {"tokens": tokens["submit"], "project": server.project_id}
            | {"rate": args.rate, "in_flight": args.in_flight},
            "probe": common,
        }  # fmt: skip
        procs = {}
        for role, job in jobs.items():
            (tmp / f"{kind}-{role}.job").write_text(json.dumps(job))
            argv = [sys.executable, str(Path(__file__).resolve()), "--role", role]
            argv += [
                "--job",
                str(tmp / f"{kind}-{role}.job"),
                "--out",
                str(tmp / f"{kind}-{role}.out"),
            ]
            procs[role] = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        cpu_before = None
        while time.time() < t_start:
            time.sleep(0.2)
        cpu_before, load_before = server.cpu_s(), os.getloadavg()
        while time.time() < t_end:
            time.sleep(0.2)
        cpu_s = server.cpu_s() - cpu_before
        load_after = os.getloadavg()
        for proc in procs.values():
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        memory.stop()
        alive = server.proc.poll() is None
        got = {}
        for role in procs:
            out = tmp / f"{kind}-{role}.out"
            got[role] = (
                json.loads(out.read_text()) if out.exists() else {"errors": [f"{role} died"]}
            )
            for key in ("ms", "live", "changed", "sent", "accepted", "skipped", "opened"):
                got[role].setdefault(key, [] if key == "ms" else 0)
            got[role].setdefault("rate_achieved", 0.0)
            got[role] |= {k: got[role].get(k, 0) for k in ("lines", "open_at_window_start")}
    finally:
        with contextlib.suppress(Exception):
            server.stop()
    window = [rss for t, rss in memory.samples if t_start <= t <= t_end]
    health = got["probe"]["ms"]
    errors = [e for role in got.values() for e in role["errors"]]
    return {
        "seeded": seeded,
        "server_alive_after": alive,
        "healthz": {
            "requests": len(health),
            "p50_ms": percentile(health, 50),
            "p99_ms": percentile(health, 99),
            "max_ms": max(health, default=float("nan")),
        },
        "errors": len(errors),
        "resent": sum(role.get("resent", 0) for role in got.values()),
        "error_kinds": sorted({e.split(":")[0] for e in errors}),
        "error_examples": errors[:10],
        "follows": {k: v for k, v in got["follows"].items() if k != "errors"},
        "ui": {
            "clients": args.ui_clients,
            "live_requests": got["ui"]["live"],
            "changed_answers": got["ui"]["changed"],
            "live_p50_ms": percentile(got["ui"]["ms"], 50),
            "live_p99_ms": percentile(got["ui"]["ms"], 99),
        },
        "submit": {
            "rate_asked": args.rate,
            "sent": got["submit"]["sent"],
            "accepted": got["submit"]["accepted"],
            "rate_achieved": got["submit"]["rate_achieved"],
            "held_back_by_in_flight": got["submit"]["skipped"],
            "p50_ms": percentile(got["submit"]["ms"], 50),
            "p99_ms": percentile(got["submit"]["ms"], 99),
        },
        "memory": {
            "rss_before_window_mib": rss_before / 2**20,
            "rss_peak_mib": max((r for _, r in memory.samples), default=0) / 2**20,
            "rss_window_first_mib": window[0] / 2**20 if window else None,
            "rss_window_last_mib": window[-1] / 2**20 if window else None,
            "rss_series_mib": [round(r / 2**20, 1) for _, r in memory.samples[::4]],
        },
        "server_cpu_cores_in_window": cpu_s / args.duration,
        "load_average": {"window_start": load_before, "window_end": load_after},
    }


# ----- the report ---------------------------------------------------------------------------


def markdown(report: dict[str, Any]) -> str:
    names = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    by = report["by_database"]
    a = report["args"]
    lines = [
        f"# Load held: {a['follows']:,} log follows, {a['ui_clients']} UI live-refresh "
        f"clients, submissions at {a['rate']}/s",
        "",
        f"{report['date']}; commit {report['code']['commit'][:7]}; {report['machine']['cpus']} "
        f"CPUs (shared with other work); the server's own code against a stub backend, "
        f"{a['rows']:,} finished workloads in the database; a {a['duration']} s window "
        f"once every follow is open; follows by {-(-a['follows'] // FOLLOWS_PER_USER)} users, "
        f"{FOLLOWS_PER_USER} each (the default --max-follows-per-user).",
        "",
        "| | " + " | ".join(names[k] for k in by) + " |",
        "|---|" + "---|" * len(by),
    ]

    def row(label: str, fmt: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(fmt(by[k]) for k in by) + " |")

    row(
        "/healthz p50 / p99 / max (ms)",
        lambda r: "{p50_ms:.1f} / {p99_ms:.1f} / {max_ms:.0f}".format(**r["healthz"]),
    )
    row(
        f"target: /healthz p99 < {TARGET_HEALTHZ_P99_MS:g} ms, no error",
        lambda r: (
            "met"
            if r["healthz"]["p99_ms"] < TARGET_HEALTHZ_P99_MS and not r["errors"]
            else "**missed**"
        ),
    )
    row(
        "errors (all clients)",
        lambda r: f"{r['errors']}" + (f" ({', '.join(r['error_kinds'])})" if r["errors"] else ""),
    )
    row(
        "requests resent after a cut connection, as their clients do",
        lambda r: f"{r.get('resent', 0)}",
    )
    row(
        "follows open at the window's start / lines read",
        lambda r: f"{r['follows']['open_at_window_start']} / {r['follows']['lines']:,}",
    )
    row(
        "UI live refreshes: answered / p50 / p99 (ms)",
        lambda r: "{live_requests} / {live_p50_ms:.0f} / {live_p99_ms:.0f}".format(**r["ui"]),
    )
    row(
        "submissions/s achieved (asked)",
        lambda r: f"{r['submit']['rate_achieved']:.0f} ({r['submit']['rate_asked']})",
    )
    row("submit p50 / p99 (ms)", lambda r: "{p50_ms:.0f} / {p99_ms:.0f}".format(**r["submit"]))
    row(
        "server RSS before / peak (MiB)",
        lambda r: "{rss_before_window_mib:.0f} / {rss_peak_mib:.0f}".format(**r["memory"]),
    )
    row(
        "server RSS at the window's start / end (MiB)",
        lambda r: (
            f"{r['memory']['rss_window_first_mib'] or 0:.0f} / "
            f"{r['memory']['rss_window_last_mib'] or 0:.0f}"
        ),
    )
    row("server CPU in the window (cores)", lambda r: f"{r['server_cpu_cores_in_window']:.2f}")
    row(
        "load average at the window's start / end",
        lambda r: (
            f"{r['load_average']['window_start'][0]:.1f} / {r['load_average']['window_end'][0]:.1f}"
        ),
    )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--databases", default="sqlite,postgresql", help="sqlite, postgresql")
    parser.add_argument("--follows", type=int, default=1000, help="open logs?follow streams")
    parser.add_argument("--targets", type=int, default=50, help="workloads the follows read")
    parser.add_argument("--ui-clients", type=int, default=200, help="live-refresh sessions")
    parser.add_argument("--rate", type=float, default=200, help="submissions a second")
    parser.add_argument("--in-flight", type=int, default=64, help="submissions unanswered, most")
    parser.add_argument("--duration", type=float, default=60, help="the window, seconds")
    parser.add_argument("--rows", type=int, default=10_000, help="finished workloads seeded")
    parser.add_argument("--run-s", type=float, default=3.0, help="a submission runs this long")
    parser.add_argument("--quick", action="store_true", help="a small smoke run; writes nothing")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.run_s)
        return 0
    if args.role:
        run_role(args.role, args.job, args.out)
        return 0
    if args.quick:
        args.follows, args.targets, args.ui_clients, args.rate = 40, 5, 10, 20
        args.duration, args.rows, args.databases = 10, 500, "sqlite"
    kinds = [k.strip() for k in args.databases.split(",") if k.strip()]
    if not kinds or any(k not in ("sqlite", "postgresql") for k in kinds):
        parser.error("--databases takes sqlite and/or postgresql")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    tmp = Path(tempfile.mkdtemp(prefix="ringleader-bench-held-"))
    dbs = Databases(tmp, kinds)
    report: dict[str, Any] = {
        "benchmark": "held_load",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "code": code_version(),
        "args": {k: v for k, v in vars(args).items() if k not in ("serve", "role", "job", "out")},
        "by_database": {},
    }
    try:
        dbs.start()
        report["databases"] = {k: dbs.version(k) for k in kinds}
        for kind in kinds:
            report["by_database"][kind] = measure(dbs, kind, args, tmp)
            print(kind, json.dumps(report["by_database"][kind], default=str)[:1500], flush=True)
    finally:
        dbs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    table = markdown(report)
    print(table)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "held_load.json").write_text(json.dumps(report, indent=2) + "\n")
        (RESULTS / "held_load.md").write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

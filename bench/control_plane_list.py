"""The workloads list at scale: --rows finished workloads written straight into a
stopped server's database through its own models, then ``GET /api/v1/workloads``
pages (plain, sorted, filtered by phase, by project, by both, deep) and /healthz
timed, and the real ``ringleader list`` command timed against that server.

bench/control_plane.py runs ``phase_list`` as its listing phase (its four
queries, one project); run by itself (issue 27, item 2: 100,000 workloads)
this file spreads the rows over --projects projects, adds the project and
deep-page queries and times the CLI. Writes bench/results/control_plane_list.json
and .md (not with --quick, a smoke run that only prints).

Usage: python bench/control_plane_list.py [--rows 100000] [--requests 200]
                                          [--projects 10] [--cli-runs 10]
       python bench/control_plane_list.py --quick
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench_quiet import MARKER, OTHER_LOAD, QUIET, clean, code_version, percentile
from bench_server import API, FINAL, ROOT, Databases, Server

RESULTS = ROOT / "bench" / "results"
TARGET_LIST_P99_MS = 50.0  # issue 27, item 2
TARGET_CLI_S = 0.5
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
# What the run by itself adds: "{project}" is one of the --projects projects' ids.
SCALE_QUERIES: dict[str, dict[str, str]] = {
    **LIST_QUERIES,
    "project": {"limit": "50", "filterBy": "projectId=={project}"},
    "project+phase": {"limit": "50", "filterBy": "projectId=={project},phase==Failed"},
    "project+phase sortBy": {
        "limit": "50",
        "filterBy": "projectId=={project},phase==Completed",
        "sortBy": "name",
        "sortOrder": "asc",
    },
    "deep page (offset 5000)": {"limit": "50", "offset": "5000"},
}


def seed(url: str, rows: int, projects: int = 1) -> dict[str, int]:
    """Insert ``rows`` finished workloads with pods and events, through the server's models,
    spread at random over ``projects`` projects (``default`` and team-01...), and one
    project ``empty`` with none when ``projects`` > 1 (the CLI's floor).

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
            extra = [f"team-{i:02d}" for i in range(1, projects)] + ["empty"] * (projects > 1)
            if extra:  # (an empty list would insert one row of defaults)
                conn.execute(insert(Project), [{"id": new_id(), "name": n} for n in extra])
            names = ["default", *extra[: projects - 1]]
            ids = dict(conn.execute(select(Project.name, Project.id)).all())
            owners = [ids[n] for n in names]
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
                owner = owners[0] if projects == 1 else rng.choice(owners)
                phase = rng.choices(FINAL, weights=(7, 2, 1))[0]
                created = now - timedelta(minutes=rows - i)
                started = created + timedelta(seconds=rng.uniform(1, 30))
                ended = started + timedelta(seconds=rng.uniform(30, 3600))
                workloads.append(
                    {
                        "id": workload_id,
                        "name": name,
                        "project_id": owner,
                        "created_by": admin,
                        "spec": {**template, "name": name, "projectId": owner},
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
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM ANALYZE"  # the visibility map too: index-only counts
                )
    finally:
        engine.dispose()
    return {"workloads": len(workloads), "pods": len(pods), "events": len(events)}


def phase_list(
    dbs: Databases,
    servers: list[Server],
    args: argparse.Namespace,
    queries: dict[str, dict[str, str]] = LIST_QUERIES,
) -> dict[str, Any]:
    """Each database: seed, then ``args.requests`` rounds of ``queries`` (and /healthz),
    interleaved; ``args.cli_runs`` (if set) times of ``ringleader list``."""
    projects = getattr(args, "projects", 1)
    results: dict[str, Any] = {}
    for kind in dbs.kinds:
        home, url, direct = dbs.fresh(kind, "list")
        server = Server(home, url)
        servers.append(server)
        server.start()  # migrations, admin, default project
        server.stop()
        started = time.perf_counter()
        counts = seed(direct, args.rows, projects)
        seeded_s = time.perf_counter() - started
        server.start()
        total = server.get(f"{API}/count")["count"]
        if total != args.rows:
            raise RuntimeError(f"seeded {args.rows} workloads, the server counts {total}")
        team = "team-01" if projects > 1 else "default"
        team_id = server.get(f"/api/v1/org-unit/projects/{team}")["id"]
        asked = {
            name: {k: v.replace("{project}", team_id) for k, v in params.items()}
            for name, params in queries.items()
        }
        latencies: dict[str, list[float]] = {name: [] for name in [*asked, "healthz"]}

        def chunk(
            n: int, server: Server = server, asked: dict[str, dict[str, str]] = asked
        ) -> dict[str, list[float]]:
            """``n`` rounds of the queries, interleaved; milliseconds per query."""
            got: dict[str, list[float]] = {name: [] for name in [*asked, "healthz"]}
            for _ in range(n):
                t = time.perf_counter()
                server.request("GET", "/healthz").raise_for_status()
                got["healthz"].append((time.perf_counter() - t) * 1000)
                for name, params in asked.items():
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
        cli = time_cli(server, getattr(args, "cli_runs", 0), projects > 1)
        server.stop()
        servers.remove(server)
        results[kind] = {
            "seeded": counts,
            "healthz_is_the_floor": "GET /healthz, no auth, no database: HTTP alone",
            "seed_s": seeded_s,
            "other_cores_per_chunk_of_50": chunk_loads,
            "queries": {
                name: {
                    "params": queries.get(name, {}),
                    "p50_ms": percentile(lat, 50),
                    "p99_ms": percentile(lat, 99),
                    "mean_ms": statistics.fmean(lat),
                    "max_ms": max(lat),
                }
                for name, lat in latencies.items()
            },
            **({"cli": cli} if cli else {}),
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


# The CLI commands timed: (label, argv after ``ringleader``).
CLI_CASES = (
    ("ringleader list (project default)", ["list"]),
    ("ringleader list -A", ["list", "-A"]),
    ("ringleader list -p empty (the floor: no rows)", ["list", "-p", "empty"]),
)


def time_cli(server: Server, runs: int, with_empty: bool) -> dict[str, Any]:
    """Wall time of the real ``ringleader`` command (the venv's entry point) against
    ``server``, as a script runs it (its output into a pipe); ``runs`` each, after one."""
    if runs <= 0:
        return {}
    exe = Path(sys.executable).with_name("ringleader")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}
    env |= {"RINGLEADER_URL": server.url, "RINGLEADER_HOME": str(server.home), "COLUMNS": "200"}
    out: dict[str, Any] = {}
    for label, argv in CLI_CASES:
        if argv[-1] == "empty" and not with_empty:
            continue
        samples, lines = [], 0
        for i in range(runs + 1):
            t = time.perf_counter()
            done = subprocess.run([str(exe), *argv], env=env, capture_output=True, text=True)
            elapsed = time.perf_counter() - t
            if done.returncode != 0:
                raise RuntimeError(f"ringleader {' '.join(argv)}: {done.stderr[-2000:]}")
            lines = done.stdout.count("\n")
            if i:  # the first warms the page cache
                samples.append(elapsed)
        out[label] = {
            "argv": argv,
            "p50_s": statistics.median(samples),
            "max_s": max(samples),
            "lines_printed": lines,
            "runs": runs,
        }
        print(f"{label}: p50 {out[label]['p50_s']:.3f} s max {out[label]['max_s']:.3f} s")
    return out


def markdown(report: dict[str, Any]) -> str:
    """The results' table: each query's p50 / p99 per database, then the CLI's times."""
    by_db = report["list"]["by_database"]
    names = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    kinds = list(by_db)
    lines = [
        f"# The workloads list at {report['list']['rows']:,} workloads",
        "",
        f"{report['date']}; commit {report['code']['commit'][:7]}; "
        f"{report['machine']['cpus']} CPUs (shared); Python {report['machine']['python']}; "
        f"a real server per database, {report['args']['projects']} projects; "
        f"{report['list']['requests_per_query']} requests per query, sequential, "
        "interleaved. Load average before / after: "
        + " / ".join(", ".join(f"{x:.1f}" for x in report[k]) for k in ("load_before", "load"))
        + ".",
        "",
        "| query | "
        + " | ".join(f"{names[k]} p50 / p99 (ms)" for k in kinds)
        + f" | target p99 < {TARGET_LIST_P99_MS:g} ms |",
        "|---|" + "---|" * len(kinds) + "---|",
    ]
    for name in by_db[kinds[0]]["queries"]:
        each = [by_db[k]["queries"][name] for k in kinds]
        met = all(q["p99_ms"] < TARGET_LIST_P99_MS for q in each)
        figures = " | ".join(f"{q['p50_ms']:.1f} / {q['p99_ms']:.1f}" for q in each)
        target = "" if name == "healthz" else ("met" if met else "**missed**")
        lines.append(f"| {name} | {figures} | {target} |")
    if all("cli" in by_db[k] for k in kinds):
        lines += [
            "",
            "| command (output into a pipe) | "
            + " | ".join(f"{names[k]} p50 / max (s)" for k in kinds)
            + f" | lines | target < {TARGET_CLI_S:g} s |",
            "|---|" + "---|" * len(kinds) + "---|---|",
        ]
        for label in by_db[kinds[0]]["cli"]:
            each = [by_db[k]["cli"][label] for k in kinds]
            met = all(c["p50_s"] < TARGET_CLI_S for c in each)
            figures = " | ".join(f"{c['p50_s']:.3f} / {c['max_s']:.3f}" for c in each)
            target = "" if "floor" in label else ("met" if met else "**missed**")
            lines.append(f"| {label} | {figures} | {each[0]['lines_printed']} | {target} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000, help="workloads in the database")
    parser.add_argument("--requests", type=int, default=200, help="GETs per query")
    parser.add_argument("--projects", type=int, default=10, help="projects the rows spread over")
    parser.add_argument("--cli-runs", type=int, default=10, help="runs of each CLI command")
    parser.add_argument(
        "--databases", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql"
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=30,
        help="seconds to wait at most, before each chunk of 50 rounds, for idle CPUs",
    )
    parser.add_argument("--tries", type=int, default=2, help="measure a noisy chunk again")
    parser.add_argument(
        "--quick", action="store_true", help="6,000 rows, 20 GETs, 2 CLI runs; writes nothing"
    )
    args = parser.parse_args()
    if args.quick:
        args.rows, args.requests, args.cli_runs, args.quiet_wait, args.tries = 6000, 20, 2, 0, 1
    kinds = [k.strip() for k in args.databases.split(",") if k.strip()]
    if not kinds or any(k not in ("sqlite", "postgresql") for k in kinds):
        parser.error("--databases takes sqlite and/or postgresql")
    if args.rows < 6000 or args.projects < 1:
        parser.error("--rows must be at least 6000 (the deep page) and --projects at least 1")
    QUIET.update(max_wait_s=args.quiet_wait, tries=args.tries)
    os.environ[MARKER] = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    tmp = Path(tempfile.mkdtemp(prefix="ringleader-bench-list-"))
    dbs = Databases(tmp, kinds)
    servers: list[Server] = []
    report: dict[str, Any] = {
        "benchmark": "control_plane_list",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "code": code_version(),
        "args": vars(args),
        "load_before": os.getloadavg(),
    }
    try:
        dbs.start()
        report["databases"] = {k: dbs.version(k) for k in kinds}
        report["list"] = phase_list(dbs, servers, args, SCALE_QUERIES)
    finally:
        for server in servers:
            with contextlib.suppress(Exception):
                server.stop()
        dbs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    report["load"] = os.getloadavg()
    report["other_cores_median"] = statistics.median(OTHER_LOAD) if OTHER_LOAD else None
    table = markdown(report)
    print(table)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "control_plane_list.json").write_text(json.dumps(report, indent=2) + "\n")
        (RESULTS / "control_plane_list.md").write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

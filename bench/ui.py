"""Web UI benchmark: the workloads page with 10,000 workloads in the database.

What is timed is one GET of the page (or of its live update) through the whole
app in this process (``TestClient``: routing, session check, the list queries,
views, the template, the security headers), with background work off so
nothing else touches the database. Issue 15's targets: < 50 ms per render of
one page (50 rows), and a live update < 10 KB when nothing changed.

Data (seeded ``random.Random``, inserted directly with bulk INSERTs, not
timed): 20 projects, 20 users (one a non-admin member of 5 projects), 10,000
workloads with 1 to 8 workers each (2 to 9 pods: about 35,000 pod rows) and 2
events each; phases spread as on a busy cluster (Completed 35%, Running 20%,
Stopped 15%, Pending 15% with an unschedulable reason, Failed 10%, a few
Creating/Initializing/Stopping); running pods hold GPUs (whole or fractions)
and CPU requests.

Cases: the default page as its first viewer since a workload changed (its
total counted, not shared), then (totals shared between renders for a second,
as the server does: ``ui_live``) the default page (newest first, 50 rows), a
status filter, a name search, a project filter with sort by name, a deep page
(page 100), the sorts by the table's Pods, GPU and CPU columns (running pods,
GPUs and CPU requested: columns with an index each, kept by ``phases`` and
stored at submit), the same default page for a researcher (visibility: 5 of
the 20 projects), and the live update as a page's only viewer when nothing
changed and when one visible row changed (its byte size, and its time). Each
case runs once untimed, then ``--runs`` times; median and p95 of the wall time
are reported.

Writes bench/results/ui.json and bench/results/ui.md (not with --quick, a
small smoke run that only prints).

Both databases by default: SQLite in a temporary directory and PostgreSQL (a
throw-away server started like the tests' fixture, tests/fixtures/postgres.py).

Usage: python bench/ui.py [--runs 30] [--workloads 10000] [--databases sqlite,postgresql]
       python bench/ui.py --workloads 100000 --runs 10 --out ui_100k
       python bench/ui.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import insert, text, update

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from ringleader.server.app import create_app  # noqa: E402
from ringleader.server.auth import create_access_key  # noqa: E402
from ringleader.server.config import ServerConfig  # noqa: E402
from ringleader.server.db import utcnow  # noqa: E402
from ringleader.server.models import (  # noqa: E402
    Event,
    Pod,
    Project,
    ProjectMember,
    User,
    Workload,
    new_id,
)
from ringleader.server.services.ui_live import LiveCache  # noqa: E402
from ringleader.server.services.workloads import requested  # noqa: E402
from ringleader.spec import WorkloadSpec  # noqa: E402

SEED = 20261124
RESULTS = ROOT / "bench" / "results"
TARGET_RENDER_MS = 50.0
TARGET_LIVE_BYTES = 10 * 1024
PHASES = [
    ("Completed", 35),
    ("Running", 20),
    ("Stopped", 15),
    ("Pending", 15),
    ("Failed", 10),
    ("Creating", 2),
    ("Initializing", 2),
    ("Stopping", 1),
]
HTML = {"Accept": "text/html"}
FETCH = {"X-Requested-With": "fetch"}


def fill(app: Any, count: int, rng: random.Random) -> tuple[str, str]:
    """Projects, users and ``count`` workloads with their pods and events; returns the
    researcher's access key (client id, secret)."""
    now = utcnow()
    with app.state.sessions() as s, s.begin():
        projects = [Project(name=f"team-{i:02d}", resources=[]) for i in range(20)]
        users = [User(name=f"user-{i:02d}", is_admin=False) for i in range(20)]
        s.add_all(projects + users)
        s.flush()
        researcher = users[0]
        for project in projects[:5]:
            s.add(ProjectMember(project_id=project.id, user_id=researcher.id))
        key = create_access_key(s, researcher)
        project_ids = [p.id for p in projects]
        user_ids = [u.id for u in users]
    phases = [p for p, weight in PHASES for _ in range(weight)]
    workloads, pods, events = [], [], []
    for i in range(count):
        workload_id = new_id()
        phase = rng.choice(phases)
        workers = rng.choice([1, 1, 1, 2, 2, 4, 8])
        gpu = rng.choice([None, 1, 2, 0.5, 0.25])
        compute: dict[str, Any] = {"cpuCoreRequest": rng.choice([1, 2, 4])}
        if isinstance(gpu, int):
            compute["gpuDevicesRequest"] = gpu
        elif gpu:
            compute |= {"gpuDevicesRequest": 1, "gpuPortionRequest": gpu}
        name = f"job-{i:05d}"
        project_id = rng.choice(project_ids)
        created = now - timedelta(seconds=(count - i) * 30)
        ended = phase in ("Completed", "Failed", "Stopped")
        spec = {
            "name": name,
            "projectId": project_id,
            "spec": {
                "command": "python train.py --epochs 10",
                "numWorkers": workers,
                "image": "pytorch/pytorch:2.3.0",
                "compute": compute,
            },
        }
        workloads.append(
            {
                "id": workload_id,
                "name": name,
                "project_id": project_id,
                "created_by": rng.choice(user_ids),
                "spec": spec,
                **requested(WorkloadSpec.from_stored(spec)),  # as submit stores them
                "running_pods": 0,  # as phases keeps it (set below with the pods)
                "spec_version": 1,
                "framework": "PyTorch",
                "desired_phase": "Stopped" if phase in ("Stopped", "Stopping") else "Running",
                "phase": phase,
                "phase_reason": "Unschedulable" if phase == "Pending" else "",
                "phase_message": (
                    f"a gang of {workers + 1} pods needs {gpu} GPUs per pod in pool default; "
                    "8 nodes have too few free"
                    if phase == "Pending"
                    else ("rank 3 exited with code 1" if phase == "Failed" else "")
                ),
                "backend": "local",
                "attempt": 0,
                "created_at": created,
                "started_at": created + timedelta(seconds=5) if phase != "Pending" else None,
                "completed_at": created + timedelta(minutes=20) if ended else None,
                "updated_at": created + timedelta(minutes=20),
            }
        )
        if phase not in ("Pending", "Creating"):
            pod_phase = {"Completed": "Succeeded", "Failed": "Failed", "Stopped": "Stopped"}.get(
                phase, "Running"
            )
            workloads[-1]["running_pods"] = (workers + 1) * (pod_phase == "Running")
            for index in range(workers + 1):
                role = "master" if index == 0 else "worker"
                pods.append(
                    {
                        "id": new_id(),
                        "workload_id": workload_id,
                        "name": f"{name}-{role}-{max(index - 1, 0)}",
                        "role": role,
                        "index": max(index - 1, 0),
                        "node": f"node-{rng.randrange(100):03d}",
                        "phase": pod_phase,
                        "attempt": 0,
                        "ranks": [index],
                        "gpus": [{"index": 0, "share": float(gpu)}] if gpu else [],
                        "isolation": "cgroup-v2",
                        "created_at": created,
                        "updated_at": created + timedelta(minutes=20),
                    }
                )
        for to in ("Pending", phase):
            events.append(
                {
                    "workload_id": workload_id,
                    "time": created,
                    "type": "PhaseChanged",
                    "to_phase": to,
                    "reason": "",
                    "message": "",
                }
            )
    with app.state.sessions() as s, s.begin():
        for table, rows in ((Workload, workloads), (Pod, pods), (Event, events)):
            for start in range(0, len(rows), 2000):
                s.execute(insert(table), rows[start : start + 2000])
    with app.state.sessions() as s, s.begin():
        # What autovacuum (PostgreSQL) does after a bulk load on a real server: without
        # statistics the planner ignores the sort indexes and sorts every row.
        s.execute(text("ANALYZE"))
    print(f"filled: {count:,} workloads, {len(pods):,} pods, {len(events):,} events", flush=True)
    return key.client_id, key.client_secret


def login(client: TestClient, client_id: str, secret: str) -> None:
    client.cookies.clear()
    form = client.get("/login", headers=HTML)
    nonce = re.search(r'name="login_nonce" value="([^"]+)"', form.text)
    assert nonce is not None
    answer = client.post(
        "/login",
        data={
            "client_id": client_id,
            "client_secret": secret,
            "login_nonce": nonce.group(1),
            "next": "/workloads",
        },
        headers=HTML,
        follow_redirects=False,
    )
    assert answer.status_code == 303, answer.text


def timed(
    client: TestClient,
    path: str,
    runs: int,
    headers: dict[str, str],
    before: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Median and p95 (ms) of ``runs`` GETs of ``path`` after one untimed; its size.
    ``before`` runs before each GET, untimed."""
    before()
    first = client.get(path, headers=headers)
    assert first.status_code == 200, (path, first.status_code, first.text[:300])
    samples, cpu = [], []
    for _ in range(runs):
        before()
        started, cpu_started = time.perf_counter(), time.process_time()
        answer = client.get(path, headers=headers)
        samples.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
        assert answer.status_code == 200
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return {
        "path": path,
        "median_ms": round(statistics.median(samples), 2),
        "p95_ms": round(p95, 2),
        "cpu_median_ms": round(statistics.median(cpu), 2),
        "bytes": len(first.content),
        "rows": (
            len(first.json().get("rows", {}))
            if first.headers["content-type"].startswith("application/json")
            else first.text.count('<tr data-id="')
        ),
    }


def measure(args: argparse.Namespace, database_url: str | None) -> dict[str, dict[str, Any]]:
    """Every case on one database (a fresh one, filled the same way)."""
    rng = random.Random(SEED)
    home = Path(tempfile.mkdtemp(prefix="rl-bench-ui-"))
    config = ServerConfig(data_dir=home, database_url=database_url, background=False)
    app = create_app(config)
    cases: dict[str, dict[str, Any]] = {}
    with TestClient(app) as client:
        researcher = fill(app, args.workloads, rng)
        creds = json.loads((home / "credentials.json").read_text())
        login(client, creds["clientId"], creds["clientSecret"])

        # As the page's only viewer, the first since a workload changed: what the page
        # holds and its total are read afresh (ui_live.LiveCache shares both for a
        # second between viewers and renders, until a workload changes).
        def alone() -> None:
            app.state.live_pages = LiveCache(app.state.workload_changes)

        label = "default page, its total counted afresh"
        cases[label] = timed(client, "/workloads", args.runs, HTML, alone)
        print(label, cases[label], flush=True)
        for label, path in (
            ("default page (50 rows, newest first)", "/workloads"),
            ("status filter (Running)", "/workloads?status=Running"),
            ("name search", "/workloads?search=12"),
            ("project filter, sorted by name", "/workloads?project=team-07&sort=name&order=asc"),
            ("page 100", "/workloads?page=100"),
            ("sorted by running pods (most first)", "/workloads?sort=pods"),
            ("sorted by GPUs requested (most first)", "/workloads?sort=gpu"),
            ("sorted by CPU requested (least first)", "/workloads?sort=cpu&order=asc"),
            ("200 rows per page", "/workloads?size=200"),
        ):
            cases[label] = timed(client, path, args.runs, HTML)
            print(label, cases[label], flush=True)
        page = client.get("/workloads", headers=HTML).text
        version = re.search(r'data-version="(\w+)"', page)
        assert version is not None
        have = ".".join(re.findall(r'data-v="(\w+)"', page))
        live = f"/workloads/live?version={version.group(1)}&have={have}"

        cases["live update, nothing changed"] = timed(client, live, args.runs, FETCH, alone)
        first_id = re.search(r'<tr data-id="(\w+)"', page)
        assert first_id is not None
        with app.state.sessions() as s, s.begin():
            s.execute(
                update(Workload)
                .where(Workload.id == first_id.group(1))
                .values(phase_message="changed", updated_at=utcnow())
            )
        cases["live update, one row changed"] = timed(client, live, args.runs, FETCH, alone)
        for label in ("live update, nothing changed", "live update, one row changed"):
            print(label, cases[label], flush=True)
        login(client, *researcher)
        label = "default page as a researcher (5 of 20 projects)"
        cases[label] = timed(client, "/workloads", args.runs, HTML)
        print(label, cases[label], flush=True)
        label = "a researcher's page sorted by running pods"
        cases[label] = timed(client, "/workloads?sort=pods", args.runs, HTML)
        print(label, cases[label], flush=True)
    return cases


def run(args: argparse.Namespace) -> dict[str, Any]:
    databases: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in args.databases:
        if kind == "sqlite":
            databases[kind] = measure(args, None)
            continue
        sys.path.insert(0, str(ROOT))  # the tests' fixture module knows how to run postgres
        from tests.fixtures.postgres import PostgresServer, postgres_bindir

        bindir = postgres_bindir()
        if bindir is None:
            raise SystemExit("PostgreSQL's server binaries are missing (apt: postgresql)")
        server = PostgresServer(bindir)
        server.init()
        server.start()
        try:
            server.admin('CREATE DATABASE "bench_ui"')
            databases[kind] = measure(args, server.url("bench_ui"))
        finally:
            server.stop()
    return {
        "benchmark": "ui",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "commit": subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "load_average": os.getloadavg(),
        "workloads": args.workloads,
        "runs": args.runs,
        "seed": SEED,
        "targets": {"render_ms": TARGET_RENDER_MS, "live_unchanged_bytes": TARGET_LIVE_BYTES},
        "databases": databases,
    }


def markdown(report: dict[str, Any]) -> str:
    databases = report["databases"]
    names = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    lines = [
        f"# Web UI benchmark: the workloads page with {report['workloads']:,} workloads",
        "",
        f"{report['date']}; commit {report['commit'][:7]}; {report['machine']['cpus']} CPUs "
        f"(shared); Python {report['machine']['python']}; in-process TestClient, background "
        f"work off; median and p95 of {report['runs']} runs after one warm-up (wall; CPU: "
        "this process's, server and client together). Load average at the end: "
        + ", ".join(f"{x:.1f}" for x in report["load_average"])
        + " (other work shares the machine).",
        "",
        "| case | "
        + " | ".join(f"{names[d]} median / p95 / CPU (ms)" for d in databases)
        + " | bytes | rows | target |",
        "|---|" + "---|" * len(databases) + "---|---|---|",
    ]
    first = next(iter(databases.values()))
    for label, case in first.items():
        each = [databases[d][label] for d in databases]
        if label == "live update, nothing changed":
            met = all(c["bytes"] < TARGET_LIVE_BYTES for c in each)
            target = f"< 10 KB ({'met' if met else 'NOT met'})"
        elif label.startswith("live") or case["rows"] > 50:
            target = ""
        else:
            met = all(c["median_ms"] < TARGET_RENDER_MS for c in each)
            target = f"< {TARGET_RENDER_MS:g} ms ({'met' if met else 'NOT met'})"
        figures = " | ".join(
            f"{c['median_ms']:.1f} / {c['p95_ms']:.1f} / {c['cpu_median_ms']:.1f}" for c in each
        )
        lines.append(f"| {label} | {figures} | {case['bytes']:,} | {case['rows']} | {target} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=30, help="timed runs per case")
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument(
        "--databases",
        default="sqlite,postgresql",
        help="comma-separated: sqlite, postgresql (a throw-away server, as the tests start it)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="1,000 workloads, 3 runs; writes nothing"
    )
    parser.add_argument(
        "--out", default="ui", help="results' name: bench/results/OUT.json and OUT.md"
    )
    args = parser.parse_args()
    if args.quick:
        args.workloads, args.runs, args.databases = 1000, 3, "sqlite"
    args.databases = [d.strip() for d in args.databases.split(",") if d.strip()]
    unknown = set(args.databases) - {"sqlite", "postgresql"}
    if unknown:
        parser.error(f"--databases: unknown {', '.join(sorted(unknown))}; use sqlite, postgresql")
    report = run(args)
    table = markdown(report)
    print(table)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=2) + "\n")
        (RESULTS / f"{args.out}.md").write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""bench/control_plane.py's listing phase: --rows finished workloads written straight
into a stopped server's database through its own models, then ``GET
/api/v1/workloads?limit=50`` (plain, sorted, filtered, both) and /healthz timed."""

from __future__ import annotations

import argparse
import random
import statistics
import time
from datetime import timedelta
from typing import Any

from bench_quiet import clean, percentile
from bench_server import API, FINAL, Databases, Server

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

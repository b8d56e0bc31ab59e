"""Migration 0008 on SQLite and real PostgreSQL: a database made before it gets
each workload's requested pods, GPUs and CPU cores filled from its stored spec,
and its Running pods counted."""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa

from ringleader.server import db
from ringleader.server.migrate import upgrade
from tests.fixtures.postgres import db_url, pg_url, postgres_server, postgres_url  # noqa: F401

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
MANY = 1_100
RUNNING_AND_NOT = [  # (workload, pod phase): only Running pods count
    ("frac", "Running"),
    ("frac", "Running"),
    ("frac", "Succeeded"),
    ("bulk-1099", "Running"),
    ("cpu", "Pending"),
]  # more than the migration's batch of 500: the backfill pages through them


def _spec(name: str, workers: int, compute: dict[str, object]) -> dict[str, object]:
    return {
        "name": name,
        "projectId": "p1",
        "spec": {"command": "true", "numWorkers": workers, "compute": compute},
    }


def test_an_old_database_gets_the_requested_figures_of_its_workloads(db_url: str) -> None:  # noqa: F811
    upgrade(db_url, "0007")
    engine = db.make_engine(db_url)
    try:
        with engine.begin() as conn:
            meta = sa.MetaData()
            projects = sa.Table("projects", meta, autoload_with=conn)
            workloads = sa.Table("workloads", meta, autoload_with=conn)
            pods = sa.Table("pods", meta, autoload_with=conn)
            conn.execute(
                projects.insert(),
                {"id": "p1", "name": "team", "resources": [], "created_at": T0, "updated_at": T0},
            )
            row = {
                "project_id": "p1",
                "spec_version": 1,
                "framework": "PyTorch",
                "desired_phase": "Stopped",
                "phase": "Completed",
                "phase_reason": "",
                "phase_message": "",
                "backend": "local",
                "attempt": 0,
                "created_at": T0,
                "updated_at": T0,
            }
            sized = [
                ("frac", _spec("frac", 3, {"gpuDevicesRequest": 1, "gpuPortionRequest": 0.5})),
                ("cpu", _spec("cpu", 1, {"cpuCoreRequest": 1.5})),
                ("memory", _spec("memory", 1, {"gpuMemoryRequest": "10G"})),
                ("broken", {"spec": {"numWorkers": "many"}}),  # an old row that no longer parses
            ]
            bulk = [
                (f"bulk-{i:04d}", _spec(f"bulk-{i:04d}", 2, {"gpuDevicesRequest": 2}))
                for i in range(MANY)
            ]
            conn.execute(
                workloads.insert(),
                [row | {"id": name, "name": name, "spec": spec} for name, spec in sized + bulk],
            )
            pod = {"role": "worker", "node": "n1", "attempt": 0, "ranks": [], "gpus": []}
            conn.execute(
                pods.insert(),
                [
                    pod
                    | {"id": f"p{i}", "workload_id": w, "name": f"w{i}", "index": i}
                    | {"phase": phase, "created_at": T0, "updated_at": T0}
                    for i, (w, phase) in enumerate(RUNNING_AND_NOT)
                ],
            )
        upgrade(db_url)
        with engine.connect() as conn:
            found = {
                name: (running, pods, gpus, cpu)
                for name, running, pods, gpus, cpu in conn.execute(
                    sa.text(
                        "SELECT id, running_pods, requested_pods, requested_gpus, "
                        "requested_cpu_cores FROM workloads"
                    )
                )
            }
    finally:
        engine.dispose()
    assert found["frac"] == (2, 4, 2.0, 0.0)  # a master and 3 workers, half a GPU each
    assert found["cpu"] == (0, 2, 0.0, 3.0)
    assert found["memory"] == (0, 2, 0.0, 0.0)  # a GPU memory request counts no devices
    assert found["broken"] == (0, 0, 0.0, 0.0)  # kept, not fatal
    assert found.pop("bulk-1099") == (1, 3, 6.0, 0.0)  # in the last batch
    assert {found[f"bulk-{i:04d}"] for i in range(MANY - 1)} == {(0, 3, 6.0, 0.0)}

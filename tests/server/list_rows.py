"""Random projects, users and workloads written straight into a database (any schema
from 0008 on), and the workloads list computed naively in Python from them: what the
list's tests compare ``list_workloads`` against (tests/server/test_workload_list*.py,
test_migration_0010.py)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PHASES = ("Pending", "Running", "Completed", "Failed", "Stopped")
LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789"


@dataclass
class Rows:
    """What was written: workloads as dicts (with ``project_name`` and ``creator`` added),
    project and user ids, and who the researcher is (a member of ``member_of``)."""

    workloads: list[dict[str, Any]]
    projects: dict[str, str]  # id -> name
    users: dict[str, str]  # id -> name
    researcher: str
    member_of: list[str]


def fill(conn: sa.Connection, rng: random.Random, count: int) -> Rows:
    """``count`` workloads over 4 projects and 3 users (one a researcher in 2 projects):
    phases, creators, times, sizes at random, some soft-deleted, some tied on time."""
    meta = sa.MetaData()
    table = {t: sa.Table(t, meta, autoload_with=conn) for t in ("projects", "users", "workloads")}
    members = sa.Table("project_members", meta, autoload_with=conn)
    projects = {f"p{i}{rng.randrange(10**6):06d}": f"team-{c}" for i, c in enumerate("dbca")}
    users = {"u-admin": "admin", "u-res": "researcher", "u-other": "other"}
    stamp = {"created_at": T0, "updated_at": T0}
    conn.execute(
        table["projects"].insert(),
        [{"id": i, "name": n, "resources": []} | stamp for i, n in projects.items()],
    )
    conn.execute(
        table["users"].insert(),
        [
            {"id": i, "name": n, "is_admin": n == "admin", "created_at": T0}
            for i, n in users.items()
        ],
    )
    member_of = sorted(projects)[:2]
    conn.execute(
        members.insert(),
        [{"project_id": p, "user_id": "u-res", "role": "researcher"} for p in member_of],
    )
    names: set[str] = set()
    rows = []
    for i in range(count):
        name = ""
        while not name or name in names:
            name = "".join(rng.choice(LETTERS) for _ in range(rng.randint(1, 6)))
        names.add(name)
        project = rng.choice(sorted(projects))
        creator = rng.choice([*users, None])
        created = T0 + timedelta(minutes=rng.randrange(count // 2 + 1))  # ties happen
        ended = rng.random() < 0.5
        rows.append(
            {
                "id": f"w{i:05d}{rng.randrange(1000):03d}",
                "name": name,
                "project_id": project,
                "created_by": creator,
                "spec": {"name": name, "projectId": project, "spec": {"command": "true"}},
                "spec_version": 1,
                "framework": rng.choice(["PyTorch", "MPI"]),
                "desired_phase": "Running",
                "phase": rng.choice(PHASES),
                "phase_reason": "",
                "phase_message": "",
                "backend": "local",
                "attempt": 0,
                "running_pods": rng.randrange(4),
                "requested_pods": rng.randrange(1, 5),
                "requested_gpus": rng.choice([0.0, 0.5, 1.0, 2.0]),
                "requested_cpu_cores": rng.choice([0.0, 1.0, 1.5]),
                "created_at": created,
                "completed_at": created + timedelta(hours=1) if ended else None,
                "updated_at": created,
                "deleted_at": created if rng.random() < 0.1 else None,
            }
        )
    conn.execute(table["workloads"].insert(), rows)
    for row in rows:
        row["project_name"] = projects[row["project_id"]]
        row["creator"] = users.get(row["created_by"] or "")
    return Rows(rows, projects, users, "u-res", member_of)


# A filter field -> the key of ``Rows.workloads`` it compares (list_workloads' _FIELDS).
KEYS = {
    "name": "name",
    "phase": "phase",
    "projectId": "project_id",
    "projectName": "project_name",
    "framework": "framework",
    "createdBy": "creator",
    "createdAt": "created_at",
}
SORT_KEYS = {
    **KEYS,
    "completedAt": "completed_at",
    "runningPods": "running_pods",
    "requestedPods": "requested_pods",
    "requestedGpus": "requested_gpus",
    "requestedCpuCores": "requested_cpu_cores",
}


def naive(
    rows: Rows,
    *,
    admin: bool,
    filters: list[tuple[str, str, Any]],
    sort_by: str,
    order: str,
    offset: int,
    limit: int,
    nulls_first_ascending: bool,
) -> tuple[list[str], int]:
    """The page's ids and the total, by Python: live rows the caller may see, every
    filter, sorted by the field then id (NULLs where the database puts them)."""

    def keep(w: dict[str, Any]) -> bool:
        if w["deleted_at"] is not None:
            return False
        if not admin and w["project_id"] not in rows.member_of:
            return False
        for field, op, value in filters:
            have = w[KEYS[field]]
            if have is None:  # SQL: a comparison with NULL is never true
                return False
            ok = {
                "==": have == value,
                "!=": have != value,
                "<=": have <= value,
                ">=": have >= value,
                "=@": op == "=@" and str(value) in str(have),
            }[op]
            if not ok:
                return False
        return True

    found = [w for w in rows.workloads if keep(w)]
    key = SORT_KEYS[sort_by]
    found.sort(key=lambda w: w["id"], reverse=order == "desc")  # ties: the sort's direction
    present = [w for w in found if w[key] is not None]
    absent = [w for w in found if w[key] is None]
    present.sort(key=lambda w: w[key], reverse=order == "desc")  # stable: ties keep id order
    nulls_first = nulls_first_ascending == (order == "asc")
    ordered = absent + present if nulls_first else present + absent
    return [w["id"] for w in ordered[offset : offset + limit]], len(found)

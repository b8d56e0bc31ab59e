"""Rows, researchers and row names for the workloads page tests."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from ringleader.server import phases
from ringleader.server.auth import create_access_key
from ringleader.server.db import utcnow
from ringleader.server.models import Pod, Project, ProjectMember, User, Workload
from ringleader.server.services.workloads import requested
from ringleader.spec import WorkloadSpec
from tests.server.conftest import API


def insert(api: API, rows: list[dict[str, Any]]) -> list[str]:
    """Workload rows straight into the database (ended phases: the loops leave them be)."""
    ids = []
    with api.client.app.state.sessions() as s, s.begin():
        admin = s.query(User).filter_by(is_admin=True).first()
        for i, row in enumerate(rows):
            project = s.query(Project).filter_by(name=row.get("project", "default")).one()
            name = row["name"]
            spec = {
                "name": name,
                "projectId": project.id,
                "spec": {
                    "command": "true",
                    "numWorkers": row.get("workers", 1),
                    "compute": row.get("compute", {}),
                },
            }
            workload = Workload(
                name=name,
                project_id=project.id,
                created_by=row.get("created_by", admin.id),
                spec=spec,
                framework="PyTorch",
                desired_phase="Stopped",
                phase=row.get("phase", "Completed"),
                created_at=utcnow() - timedelta(minutes=len(rows) - i),
                completed_at=row.get("completed_at"),
                **requested(WorkloadSpec.from_stored(spec)),  # as submit stores them
            )
            s.add(workload)
            s.flush()
            for index in range(row.get("running", 0)):
                pod = Pod(
                    workload_id=workload.id,
                    name=f"{name}-worker-{index}",
                    role="worker",
                    index=index,
                    node="local",
                )
                s.add(pod)
                s.flush()
                phases.transition_pod(s, pod, "Running")  # the door counts it on the row
            ids.append(workload.id)
    return ids


def researcher(api: API, name: str, project: str) -> tuple[str, str]:
    """A non-admin member of a new ``project``; its access key."""
    with api.client.app.state.sessions() as s, s.begin():
        user = User(name=name, is_admin=False)
        target = Project(name=project, resources=[])
        s.add_all([user, target])
        s.flush()
        s.add(ProjectMember(project_id=target.id, user_id=user.id, role="researcher"))
        key = create_access_key(s, user)
    return key.client_id, key.client_secret


def names(html: str) -> list[str]:
    return re.findall(r'<td data-label="Workload"><a href="/workloads/\w+">([^<]+)</a>', html)

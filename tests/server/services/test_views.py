"""The views called directly, without HTTP, as the web UI will call them: a
workload with pods and events on a real (SQLite) database, migrated and
bootstrapped as the server does it."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from ringleader.errors import NotFound
from ringleader.server import phases
from ringleader.server.db import Database
from ringleader.server.models import Pod, User, Workload
from ringleader.server.schemas import EventOut, PodOut, WorkloadOut
from ringleader.server.services import node_views, views
from ringleader.server.services import workloads as svc
from ringleader.spec import WorkloadSpec


def _running_workload(database: Database) -> str:
    """``train`` (a master and one worker, 1 GPU each) Running on sim-0, pods placed."""
    with database.writer() as s, s.begin():
        admin = s.scalar(select(User).where(User.name == "admin"))
        body = {"name": "train", "projectId": "default",
                "spec": {"command": "python train.py", "numWorkers": 1, "compute": {"gpuDevicesRequest": 1}}}  # fmt: skip
        workload = svc.submit(s, admin, WorkloadSpec.model_validate(body))
        s.flush()
        for role, index, rank, gpu in (("worker", 0, 1, 1), ("master", 0, 0, 0)):
            s.add(
                Pod(
                    workload_id=workload.id,
                    name=f"train-{role}-{index}",
                    role=role,
                    index=index,
                    node="sim-0",
                    phase="Running",
                    ranks=[rank],
                    gpus=[{"index": gpu, "share": 1.0}],
                )
            )
        workload.handle = "test:train"
        phases.transition(s, workload, "Running", reason="Started")
        return workload.id


def test_a_workload_its_pods_and_events_as_the_ui_sees_them(database: Database) -> None:
    workload_id = _running_workload(database)
    with database.reader() as s:
        admin = s.scalar(select(User).where(User.name == "admin"))
        shown = views.workload(s, admin, workload_id)
        pods = views.pods(s, admin, workload_id)
        events = views.events(s, admin, workload_id)
        page = views.workloads(s, admin, filters=["phase==Running"])
        count = views.workload_count(s, admin, ["name=@rai"])
        (node,) = node_views.nodes(s, admin)

    assert isinstance(shown, WorkloadOut)
    assert (shown.name, shown.actual_phase, shown.project_name) == ("train", "Running", "default")
    assert shown.created_by == "admin"  # the creator's name, not its id
    assert (shown.requested_pods, shown.running_pods, shown.nodes) == (2, 2, ["sim-0"])
    assert shown.requested_gpus == 2

    assert all(isinstance(p, PodOut) for p in pods)
    assert [p.name for p in pods] == ["train-master-0", "train-worker-0"]  # master first
    assert [p.ranks for p in pods] == [[0], [1]]

    assert all(isinstance(e, EventOut) for e in events)
    assert events[0].type == "Submitted"
    assert [e.to_phase for e in events if e.type == "PhaseChanged"] == ["Pending", "Running"]
    assert [e.id for e in events] == sorted(e.id for e in events)

    assert (page.total, [w.workload_id for w in page.workloads]) == (1, [workload_id])
    assert page.workloads[0] == shown  # one shape whether listed or shown alone
    assert count.count == 1
    assert node.name == "sim-0" and node.allocated_gpus == 2.0
    assert node.pods == ["train-master-0", "train-worker-0"]


def test_views_show_another_project_s_workload_to_nobody_but_its_members(
    database: Database,
) -> None:
    workload_id = _running_workload(database)
    with database.writer() as s, s.begin():
        s.add(User(name="outsider", is_admin=False))
    with database.reader() as s:
        outsider = s.scalar(select(User).where(User.name == "outsider"))
        for view in (views.workload, views.pods, views.events):
            with pytest.raises(NotFound):
                view(s, outsider, workload_id)
        assert views.workloads(s, outsider).total == 0
        assert views.me(s, outsider).projects == []
        (node,) = node_views.nodes(s, outsider)
        assert node.allocated_gpus == 2.0 and node.pods == []  # amounts, not names
        assert s.get(Workload, workload_id) is not None

"""The background pipelines against fake backends (fast unit tests): polls that
change nothing write nothing; a placement reaches the backend with the pods'
bindings; a backend's unasked Stopped ends the run through the door; a slow
stop delays no other workload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from ringleader.server.backends import BackendSet
from ringleader.server.backends.base import Backend, BackendRequest, BackendStatus, PodStatus
from ringleader.server.background import Background, World
from ringleader.server.models import Event, User, Workload
from ringleader.server.services import workload_intents as intents
from ringleader.server.services import workloads as svc
from ringleader.spec import WorkloadSpec
from tests.helpers.database import one_node_database


class SteadyBackend(Backend[BackendRequest]):
    """Starts nothing; every poll says both pods run (or what ``phase`` says)."""

    name = "steady"

    def __init__(self) -> None:
        self.requests: list[BackendRequest] = []
        self.cancelled: list[str] = []
        self.polls = 0
        self.phase, self.pod_phase = "Running", "Running"

    def plan(self, request: BackendRequest) -> BackendRequest:
        return request

    def submit(self, plan: BackendRequest) -> str:
        self.requests.append(plan)
        return f"steady:{plan.workload_id}"

    def poll(self, handle: str) -> BackendStatus:
        self.polls += 1
        pods = [
            PodStatus("w-master-0", "master", 0, self.pod_phase, "elsewhere", ranks=(0,)),
            PodStatus("w-worker-0", "worker", 0, self.pod_phase, "elsewhere", ranks=(1,)),
        ]
        return BackendStatus(self.phase, pods=pods)

    def is_live(self, handle: str) -> bool:
        return True

    def stop(self, handle: str) -> None:
        self.cancelled.append(handle)

    def logs(self, handle: str, pod: str | None = None, tail: int | None = None) -> Any:
        return iter(())


def test_steady_polls_write_nothing_and_bindings_reach_the_backend(tmp_path: Path) -> None:
    database, workload_id, backend, loops = _world(tmp_path, compute={"gpuDevicesRequest": 1})
    try:
        loops.tick()  # places it
        loops.tick()  # Running, pods Running
        (request,) = backend.requests
        assert {name: (p.node, [g.index for g in p.gpus]) for name, p in request.placements.items()} == {
            "w-master-0": ("sim-0", [0]), "w-worker-0": ("sim-0", [1])
        }  # fmt: skip

        def state() -> tuple[Any, ...]:
            with database.reader() as s:
                w = s.get(Workload, workload_id)
                events = s.scalar(select(func.count()).select_from(Event))
                return w.phase, w.updated_at, events, [(p.node, p.phase) for p in w.pods]

        before = state()
        assert before[0] == "Running"
        assert before[3] == [("sim-0", "Running"), ("sim-0", "Running")]  # the binding's node
        polls, loads = backend.polls, loops.reconciling.polled.loads
        loops.reconciling.poll_every_s = 0.0  # every pass polls it
        for _ in range(5):
            loops.tick()
        assert backend.polls == polls + 5
        assert state() == before  # nothing written: same stamp, same events
        # ... and nothing loaded as objects again: each pass read only the row's stamp
        assert loops.reconciling.polled.loads == loads
        # An unchanged row is polled at most every poll_every_s; a changed one at once.
        loops.reconciling.poll_every_s = 3600.0
        polls = backend.polls
        for _ in range(3):
            loops.tick()
        assert backend.polls == polls
        with database.writer() as s, s.begin():
            s.get(Workload, workload_id).phase_message = "a user's change"
        loops.tick()
        assert backend.polls == polls + 1
    finally:
        database.dispose()


def test_a_row_written_by_anyone_is_loaded_again_and_its_poll_mends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reconciling keeps the rows it polled between passes; a write to the workload or
    to one of its pods, by any writer, moves the row's stamp, so the next pass polls
    the row as it now is (here: a pod another writer marked Unknown is Running again,
    as the backend says) and not its kept copy."""
    from ringleader.server.background import reconciling

    database, workload_id, _, loops = _world(tmp_path)
    try:
        loops.tick()  # places it
        loops.tick()  # Running, pods Running
        polled = loops.reconciling.polled
        loads = polled.loads
        with database.writer() as s, s.begin():
            s.get(Workload, workload_id).pods[1].phase = "Unknown"
        loops.tick()
        assert polled.loads == loads + 1  # that row alone, loaded again
        with database.reader() as s:
            assert [p.phase for p in s.get(Workload, workload_id).pods] == ["Running"] * 2
        loads = polled.loads
        loops.tick()  # its own write moved the stamp once more: loaded once, then kept
        loops.tick()
        assert polled.loads == loads + 1
        monkeypatch.setattr(reconciling, "FULL_LOAD_S", 0.0)  # the bound: a full load
        loops.tick()
        assert polled.loads == loads + 2
        with database.writer() as s, s.begin():  # no longer polled (no handle): forgotten
            s.get(Workload, workload_id).handle = None
        loops.tick()
        assert polled.rows == {}
    finally:
        database.dispose()


def _world(tmp_path: Path, **spec: Any) -> tuple[Any, str, SteadyBackend, Background]:
    """A migrated database with one simulated 2-GPU node, one submitted workload
    ``w`` (its spec: ``spec``), a SteadyBackend and inline pipelines over them."""
    database = one_node_database(tmp_path)
    with database.writer() as s, s.begin():
        admin = s.scalar(select(User).where(User.name == "admin"))
        body = {"name": "w", "projectId": "default",
                "spec": {"command": "true", "numWorkers": 1, **spec}}  # fmt: skip
        workload_id = svc.submit(s, admin, WorkloadSpec.model_validate(body)).id
    backend = SteadyBackend()
    world = World(database, BackendSet.only(backend), tmp_path / "runs")
    return database, workload_id, backend, Background(world, inline=True)


def test_a_workload_deleted_after_the_snapshot_is_not_started(tmp_path: Path) -> None:
    from ringleader import sched
    from ringleader.server.snapshot import load_snapshot

    database, workload_id, backend, loops = _world(tmp_path)
    try:
        with database.reader() as s:
            loaded = load_snapshot(s)
        (placement,) = sched.schedule(loaded.snapshot).placements
        with database.writer() as s, s.begin():  # the user deletes it meanwhile
            intents.request_delete(s, s.get(Workload, workload_id))
        loops.placing.place(loaded.waiting[workload_id], placement, loaded.nodes)
        assert backend.requests == []  # nothing started
        with database.reader() as s:
            assert s.get(Workload, workload_id).phase == "Deleting"
    finally:
        database.dispose()


def test_a_start_that_cannot_be_recorded_is_cancelled(tmp_path: Path) -> None:
    database, workload_id, backend, loops = _world(tmp_path)
    from ringleader.server.background import placing

    real_act = placing.act
    calls = []

    def failing_record(world: Any, workload: str, change: Any) -> None:
        calls.append(change.__name__)
        if change.__name__ == "record":
            raise RuntimeError("database went away")
        real_act(world, workload, change)

    placing.act = failing_record  # type: ignore[assignment]
    try:
        with pytest.raises(RuntimeError, match="went away"):
            loops.tick()
        assert calls == ["claim", "record"]
        assert backend.cancelled == [f"steady:{workload_id}"]  # no process left unowned
    finally:
        placing.act = real_act  # type: ignore[assignment]
        database.dispose()


def test_one_unreadable_workload_does_not_stop_the_others_being_placed(tmp_path: Path) -> None:
    database, good, backend, loops = _world(tmp_path)
    try:
        with database.writer() as s, s.begin():
            bad = s.get(Workload, good)
            clone = Workload(
                name="old", project_id=bad.project_id, framework=bad.framework,
                spec={**bad.spec, "name": "old", "spec": {**bad.spec["spec"],
                      "priorityClass": "from-before-the-check"}},
                phase="Pending", desired_phase="Running",
            )  # fmt: skip
            s.add(clone)
        loops.tick()
        assert [r.workload_id for r in backend.requests] == [good]
    finally:
        database.dispose()

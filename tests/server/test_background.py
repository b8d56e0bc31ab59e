"""The background pipelines and the backend seam, end to end.

- a slow stop (a stub backend whose stop blocks until released) delays no
  other workload's placement: the next submission is Running meanwhile;
- a Running workload whose detached supervisor is signalled from outside
  ends Failed with its reason (the door decides; it never stays Running);
- a failed attempt of a backend that does not restart in place goes back to
  the scheduler, up to backoffLimit;
- a backend is one class plus a name: ``--backend`` takes a dotted path.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from ringleader.errors import InvalidSpec
from ringleader.server.app import create_app
from ringleader.server.backends import BackendChoice, BackendSet
from ringleader.server.backends.base import (
    Backend,
    BackendRequest,
    BackendStatus,
    Capabilities,
    PodPlacement,
    PodStatus,
)
from ringleader.server.config import ServerConfig
from ringleader.server.inventory import simulated_nodes
from ringleader.server.models import Workload
from tests.conftest import wait_until
from tests.server.conftest import API, SQLITE_ONLY, stop_workloads


class ToyBackend(Backend[BackendRequest]):
    """A backend in a test module: every pod Running at once; ``stop`` blocks
    while ``hold`` is clear (a frozen supervisor); ``fail`` makes polls Failed."""

    name = "toy"
    STATES: ClassVar[dict[str, str]] = {"up": "Running", "down": "Failed", "gone": "Stopped"}
    capabilities = Capabilities(multi_node=True, restarts_in_place=False)
    hold = threading.Event()
    stops_begun: ClassVar[list[str]] = []

    def __init__(self) -> None:
        self.started: dict[str, BackendRequest] = {}
        self.native: dict[str, str] = {}

    def plan(self, request: BackendRequest) -> BackendRequest:
        return request

    def submit(self, plan: BackendRequest) -> str:
        handle = f"toy-{plan.workload_id}-{plan.attempt_offset}"
        self.started[handle], self.native[handle] = plan, "up"
        return handle

    def poll(self, handle: str) -> BackendStatus:
        request, native = self.started[handle], self.native[handle]
        pods = [
            PodStatus(name, role, index, "Running" if native == "up" else "Failed", "sim-0")
            for name, role, index in request.spec.pod_layout(request.name)
        ]
        return BackendStatus(self.phase_of(native), message=f"toy says {native}", pods=pods)

    def is_live(self, handle: str) -> bool:
        return self.native.get(handle) == "up"

    def stop(self, handle: str) -> None:
        self.stops_begun.append(handle)
        self.hold.wait(60)
        self.native[handle] = "gone"

    def logs(self, handle: str, pod: str | None = None, tail: int | None = None) -> Any:
        return iter(())


@pytest.fixture
def toy(tmp_path: Path) -> Any:
    ToyBackend.hold.clear()
    ToyBackend.stops_begun.clear()
    backend = ToyBackend()
    config = ServerConfig(
        data_dir=tmp_path / "home",
        loop_interval_s=0.1,
        nodes=simulated_nodes("2x4gpu"),
        run_as="server",
    )
    with TestClient(create_app(config, backend)) as client:
        yield API(client, tmp_path / "home"), backend
    ToyBackend.hold.set()


def test_a_stop_that_hangs_delays_no_other_placement(toy: Any) -> None:
    api, _ = toy
    first = api.submit("slow-to-stop", "true").json()["workloadId"]
    api.wait_phase(first, {"Running"})
    assert api.post(f"/api/v1/workloads/distributed/{first}/suspend").status_code == 202
    wait_until(lambda: ToyBackend.stops_begun, 30, "the stop to begin")
    # The stop hangs on a worker; the next workload is placed, started and polled.
    second = api.submit("next-one", "true").json()["workloadId"]
    api.wait_phase(second, {"Running"})
    assert api.get(f"/api/v1/workloads/{first}").json()["actualPhase"] == "Stopping"
    ToyBackend.hold.set()
    api.wait_phase(first, {"Stopped"})


def test_a_failed_attempt_goes_back_to_the_scheduler_until_backoff_is_spent(toy: Any) -> None:
    api, backend = toy
    wid = api.submit("flaky", "true", backoffLimit=1).json()["workloadId"]
    api.wait_phase(wid, {"Running"})
    backend.native[f"toy-{wid}-0"] = "down"
    # Not restarted in place: the scheduler places attempt 1 as a new start.
    wait_until(lambda: f"toy-{wid}-1" in backend.started, 30, "a second start")
    w = api.wait_phase(wid, {"Running"})
    assert w["phaseMessage"] == "toy says up"
    backend.native[f"toy-{wid}-1"] = "down"
    w = api.wait_phase(wid, {"Failed"})
    assert "no restarts left (backoffLimit 1)" in w["phaseMessage"], w
    assert len(backend.started) == 2


def test_an_unknown_native_state_is_unknown_and_the_door_keeps_it() -> None:
    assert ToyBackend.phase_of("up") == "Running"
    assert ToyBackend.phase_of("teleported") == "Unknown"


def test_backend_choices_name_the_flag_and_route_pools() -> None:
    assert BackendChoice.parse("local") == BackendChoice("local")
    assert BackendChoice.parse("ssh@gpus") == BackendChoice("ssh", "", "gpus")
    with pytest.raises(InvalidSpec) as err:
        BackendChoice.parse("warp-drive")
    assert err.value.where == "--backend" and "local" in err.value.problem
    dotted = f"{__name__}.ToyBackend"
    backends = BackendSet([BackendChoice("local"), BackendChoice(dotted, pool="toys")])
    assert backends.named("toy") is backends.for_pool("toys")  # rows keep the short name
    assert backends.for_pool("default").name == "local"
    ssh = {"p": PodPlacement("n1", "ssh")}
    assert backends.for_placement(ssh, {"n1": "default"}).name == "ssh"
    assert backends.for_placement(ssh, {"n1": "toys"}).name == "toy"  # the pool's choice wins
    with pytest.raises(InvalidSpec):
        BackendSet([BackendChoice("local", arg="surprise")])


@SQLITE_ONLY
def test_a_supervisor_signalled_from_outside_ends_the_run_with_a_reason(api: API) -> None:
    wid = api.submit("signalled", "python -c 'import time; time.sleep(300)'").json()["workloadId"]
    api.wait_phase(wid, {"Running"})
    with api.client.app.state.readers() as s:
        handle = s.scalar(select(Workload.handle).where(Workload.id == wid))
    state = json.loads((Path(handle) / "state.json").read_text())
    os.kill(state["pid"], signal.SIGTERM)  # someone else stops the supervisor
    w = api.wait_phase(wid, {"Failed", "Stopped", "Completed"})
    assert w["actualPhase"] == "Failed"
    assert "nobody asked ringleader to stop it" in w["phaseMessage"]
    pods = api.get(f"/api/v1/workloads/{wid}/pods").json()["pods"]
    assert pods and all(p["status"] in ("Stopped", "Failed") for p in pods), pods
    stop_workloads(api.home)


def test_what_the_backend_cannot_do_is_refused_at_submit_naming_the_field(toy: Any) -> None:
    api, backend = toy
    response = api.submit("shell", "true", interactive=True)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["spec", "interactive"]
    assert "toy backend cannot exec" in response.json()["message"]
    assert api.get("/api/v1/workloads").json()["workloads"] == []  # nothing stored
    assert backend.started == {}
    ToyBackend.capabilities = Capabilities(multi_node=True, suspend=False)
    try:
        wid = api.submit("stuck", "true").json()["workloadId"]
        api.wait_phase(wid, {"Running"})
        refused = api.post(f"/api/v1/workloads/distributed/{wid}/suspend")
        assert refused.status_code == 422 and "cannot suspend" in refused.text
        assert api.get(f"/api/v1/workloads/{wid}").json()["actualPhase"] == "Running"
    finally:
        ToyBackend.capabilities = Capabilities(multi_node=True, restarts_in_place=False)


def test_a_pipeline_paces_on_its_calls_cpu_as_well_as_its_own() -> None:
    """Its polls, starts and stops run on its workers, not its own thread: their CPU
    time is summed (``cpu_spent``) and the next pass waits PACE times all of it (it
    counted only the pass's own, so thousands of polls a pass went unpaced)."""
    import time

    from ringleader.server.background.calls import BackendCalls, Busy
    from ringleader.server.background.pipeline import MIN_PASS_GAP_S, PACE, pass_gap

    calls = BackendCalls("test", Busy(), workers=2)
    try:
        assert calls.cpu_spent() == 0.0

        def burn() -> bool:
            start = time.thread_time()
            while time.thread_time() - start < 0.05:
                pass
            return False

        for name in ("a", "b"):
            assert calls.run(name, "burn", burn)
        wait_until(lambda: calls.cpu_spent() >= 0.1, 30, "both calls' CPU counted")
        assert not calls.busy.older_than(-1.0)  # both released
    finally:
        calls.shutdown()
    assert pass_gap(0.0, 0.0) == MIN_PASS_GAP_S
    assert pass_gap(0.01, 0.1) == pytest.approx(PACE * 0.11)

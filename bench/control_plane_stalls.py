"""The stalls phase of bench/control_plane.py: placement while stops hang.

A server runs against ``SlowStopBackend`` (a stub: a start returns at once
with every pod Running; a stop takes ``--stop-s`` seconds, as a frozen
supervisor's does). ``--stalled`` workloads are started and then all deleted
at once, so their stops are in flight together; meanwhile ``--probes``
workloads are submitted one after another and each is timed from just before
its POST until the API shows it Running (polling every 10 ms). Target: p99
under 1 s (before the background work was split, each stop took its time
inside the one loop thread, so a probe waited for every stop ahead of it).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from ringleader.server.backends.base import (
    Backend,
    BackendRequest,
    BackendStatus,
    Capabilities,
    LogLine,
    PodStatus,
)

TARGET_P99_S = 1.0
STOP_S_ENV = "RINGLEADER_BENCH_STOP_S"


class SlowStopBackend(Backend):
    """Runs nothing; every pod Running at once; each stop sleeps ``$RINGLEADER_BENCH_STOP_S``."""

    name: ClassVar[str] = "slowstop"
    capabilities: ClassVar[Capabilities] = Capabilities(multi_node=True)
    STATES: ClassVar[dict[str, str]] = {"up": "Running", "stopped": "Stopped"}

    def __init__(self) -> None:
        self.stop_s = float(os.environ.get(STOP_S_ENV, "20"))
        self.runs: dict[str, tuple[BackendRequest, str]] = {}
        self.lock = threading.Lock()

    def plan(self, request: BackendRequest) -> BackendRequest:
        return request

    def submit(self, plan: BackendRequest) -> str:
        handle = f"slow:{plan.workload_id}:{plan.attempt_offset}"
        with self.lock:
            self.runs[handle] = (plan, "up")
        return handle

    def poll(self, handle: str) -> BackendStatus:
        with self.lock:
            request, native = self.runs[handle]
        pods = [
            PodStatus(name, role, index, "Running" if native == "up" else "Stopped", "stub")
            for name, role, index in request.spec.pod_layout(request.name)
        ]
        return BackendStatus(self.phase_of(native), pods=pods)

    def is_live(self, handle: str) -> bool:
        with self.lock:
            return handle in self.runs and self.runs[handle][1] == "up"

    def stop(self, handle: str) -> None:
        time.sleep(self.stop_s)  # a supervisor that ignores SIGTERM until its grace ends
        with self.lock:
            request, _ = self.runs[handle]
            self.runs[handle] = (request, "stopped")

    def logs(
        self, handle: str, pod: str | None = None, tail: int | None = None
    ) -> Iterator[LogLine]:
        return iter(())


def wait_running(server: Any, workload_id: str, timeout_s: float = 120.0) -> float:
    """Seconds until ``workload_id`` shows Running, polled every 10 ms."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        phase = server.get(f"/api/v1/workloads/{workload_id}")["actualPhase"]
        if phase == "Running":
            return time.perf_counter() - started
        if phase in ("Failed", "Completed", "Stopped"):
            raise RuntimeError(f"workload {workload_id} ended {phase}")
        time.sleep(0.01)
    raise RuntimeError(f"workload {workload_id} not Running after {timeout_s:.0f} s")


def run_stalls(server: Any, stalled: int, probes: int, stop_s: float) -> dict[str, Any]:
    """Start ``stalled`` workloads, delete them all, then time ``probes`` submissions."""
    victims = [server.submit(f"victim-{i}", "true") for i in range(stalled)]
    for workload_id in victims:
        wait_running(server, workload_id)
    for workload_id in victims:
        response = server.request("DELETE", f"/api/v1/workloads/distributed/{workload_id}")
        response.raise_for_status()
    samples = []
    for i in range(probes):
        started = time.perf_counter()
        workload_id = server.submit(f"probe-{i}", "true")
        wait_running(server, workload_id)
        samples.append(time.perf_counter() - started)
    still_stopping = sum(
        server.get(f"/api/v1/workloads/{w}")["actualPhase"] == "Deleting" for w in victims
    )
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "stalled": stalled,
        "probes": probes,
        "stop_s": stop_s,
        "stops_still_in_flight_after_probes": still_stopping,
        "submit_to_running_s": samples,
        "p50_s": statistics.median(samples),
        "p99_s": p99,
        "max_s": max(samples),
        "meets_target": p99 < TARGET_P99_S,
    }

"""Background loops: act on recorded intent and bring backend state back.

Each tick is load -> process -> apply: read what needs action in one short
transaction, do the backend I/O with no transaction open, then write the
outcome in another (re-reading the row, since a user may have acted in
between).  Every phase change goes through ``phases.transition``.

- admit:     Pending (desired Running)  -> backend.submit -> Initializing
- reconcile: Initializing/Running/Degraded/Unknown -> backend.poll -> phases, pods
- stop:      Stopping -> backend.cancel -> Stopped
- delete:    Deleting -> backend.cancel -> Deleted (row kept, deleted_at set)
- resume:    Resuming -> Pending (a fresh start; attempts continue counting)
- linger:    Completed/Failed with pods still Running (cleanPodPolicy None)
             -> backend.poll -> those pods' phases, until they end
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, sessionmaker

from ringleader.server import phases
from ringleader.server.backends.base import Backend, BackendRequest, BackendStatus
from ringleader.server.models import Pod, Project, Workload
from ringleader.spec import WorkloadSpec

log = logging.getLogger("ringleader.server.loops")
POLLED = ("Initializing", "Running", "Degraded", "Unknown")
ACTED_ON = ("Pending", "Resuming", "Stopping", "Deleting", *POLLED)
LINGER = ("Completed", "Failed")  # ended, but some pods may still run (cleanPodPolicy None)
_POD_PHASE = {
    "Succeeded": "Succeeded",
    "Failed": "Failed",
    "Running": "Running",
    "Stopped": "Stopped",
    "Pending": "Pending",
}


class Loops:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        backend: Backend,
        runs_dir: Path,
        interval_s: float = 0.5,
    ) -> None:
        self.sessions = sessions
        self.backend = backend
        self.runs_dir = runs_dir
        self.interval_s = interval_s
        self.wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ----- lifecycle -------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ringleader-loops", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake.set()
        if self._thread:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # a bad tick must not end the loop; the next one retries
                log.exception("loop tick failed")
            self.wake.wait(self.interval_s)
            self.wake.clear()

    # ----- one pass --------------------------------------------------------
    def tick(self) -> None:
        lingering = (
            select(Pod.id).where(Pod.workload_id == Workload.id, Pod.phase == "Running").exists()
        )
        with self.sessions() as s:
            rows = s.execute(
                select(Workload.id, Workload.phase, Workload.handle, Workload.desired_phase).where(
                    Workload.deleted_at.is_(None),
                    or_(
                        Workload.phase.in_(ACTED_ON),
                        Workload.phase.in_(LINGER) & Workload.handle.is_not(None) & lingering,
                    ),
                )
            ).all()
        for workload_id, phase, handle, desired in rows:
            if phase == "Pending" and desired == "Running":
                self._admit(workload_id)
            elif (phase in POLLED or phase in LINGER) and handle:
                self._apply_status(workload_id, self.backend.poll(handle))
            elif phase in ("Stopping", "Deleting"):
                if handle:
                    self.backend.cancel(handle)
                self._finish_stop(workload_id, phase)
            elif phase == "Resuming":
                self._act(
                    workload_id, lambda s, w: phases.transition(s, w, "Pending", reason="Resumed")
                )

    def _act(self, workload_id: str, change: Callable[[Session, Workload], object]) -> None:
        with self.sessions() as s, s.begin():
            workload = s.get(Workload, workload_id)
            if workload is not None:
                change(s, workload)

    def _admit(self, workload_id: str) -> None:
        with self.sessions() as s:
            w = s.get(Workload, workload_id)
            if w is None or w.phase != "Pending":
                return
            project = s.get(Project, w.project_id)
            request = BackendRequest(
                workload_id=w.id,
                name=w.name,
                project=project.name if project else w.project_id,
                spec=WorkloadSpec.model_validate(w.spec),
                run_dir=str(self.runs_dir / w.id),
                attempt_offset=w.attempt,
            )
        Path(request.run_dir).mkdir(parents=True, exist_ok=True)
        try:
            handle = self.backend.submit(request)
        except Exception as exc:  # the backend refused: the workload fails with its reason
            reason = str(exc)
            self._act(
                workload_id,
                lambda s, w: phases.transition(
                    s, w, "Failed", reason="SubmitFailed", message=reason
                ),
            )
            return

        def record(s: Session, w: Workload) -> None:
            w.handle = handle
            for pod in w.pods:  # a resumed workload's pods start over
                if pod.phase in phases.POD_ENDED:
                    phases.restart_pod(s, pod, attempt=w.attempt, reason="Resumed")
            existing = {p.name for p in w.pods}
            for name, role, index in request.spec.pod_layout(w.name):
                if name not in existing:
                    s.add(
                        Pod(
                            workload_id=w.id,
                            name=name,
                            role=role,
                            index=index,
                            node="localhost",
                            phase="Pending",
                            ranks=[],
                        )
                    )
            if w.phase == "Pending":
                phases.transition(
                    s,
                    w,
                    "Initializing",
                    reason="Admitted",
                    message=f"started by {self.backend.name}",
                )
            else:  # deleted or suspended meanwhile: the next tick cancels it
                pass

        self._act(workload_id, record)

    def _apply_status(self, workload_id: str, status: BackendStatus) -> None:
        def apply(s: Session, w: Workload) -> None:
            if w.phase not in POLLED and w.phase not in LINGER:
                return  # the user asked for something else meanwhile
            w.attempt = max(w.attempt, status.attempt)
            pods = {p.name: p for p in w.pods}
            for ps in status.pods:
                pod = pods.get(ps.name)
                if pod is None:
                    continue
                target = _POD_PHASE.get(ps.phase, "Unknown")
                if ps.attempt > pod.attempt:
                    phases.restart_pod(s, pod, attempt=ps.attempt, reason="GangRestarted")
                pod.node, pod.ranks = ps.node or pod.node, list(ps.ranks)
                if pod.phase != target:
                    phases.transition_pod(s, pod, target, exit_code=ps.exit_code)
            if status.phase in phases.WORKLOAD_TRANSITIONS[w.phase]:
                phases.transition(s, w, status.phase, reason=status.phase, message=status.message)

        self._act(workload_id, apply)

    def _finish_stop(self, workload_id: str, phase: str) -> None:
        def finish(s: Session, w: Workload) -> None:
            for pod in w.pods:
                if pod.phase in ("Pending", "Running", "Unknown"):
                    phases.transition_pod(s, pod, "Stopped")
            if phase == "Stopping" and w.phase == "Stopping":
                phases.transition(s, w, "Stopped", reason="Suspended")
            elif phase == "Deleting" and w.phase == "Deleting":
                phases.transition(s, w, "Deleted", reason="Deleted")

        self._act(workload_id, finish)

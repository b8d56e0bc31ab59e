"""Stopping: recorded intent to stop -> the backend's cancel -> the end phase.

- Stopping (suspend) -> cancel -> Stopped;
- Deleting -> cancel -> Deleted (the row kept, deleted_at set);
- Resuming -> cancel what the last run left (cleanPodPolicy None) -> Pending:
  a fresh start whose attempts continue counting;
- a resume asked during a suspend's stop: Stopped, then Resuming; a suspend
  asked during a resume's: Stopped.

Each cancel runs on this pipeline's workers: a stop whose supervisor is
frozen takes its grace and more, and delays no other workload's stop,
poll or placement.  A workload whose start is still in flight is left for
the next pass, so the cancel has the handle to stop.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.server import phases
from ringleader.server.background.pipeline import Pipeline, act
from ringleader.server.models import Workload

ACTED_ON = (*phases.STOPPING, "Resuming")


class Stopping(Pipeline):
    name = "stopping"
    workers = 16

    def run_once(self) -> None:
        with self.world.readers() as s:
            rows = s.execute(
                select(Workload.id, Workload.phase, Workload.handle, Workload.backend).where(
                    Workload.deleted_at.is_(None), Workload.phase.in_(ACTED_ON)
                )
            ).all()
        for workload_id, phase, handle, backend in rows:
            if workload_id in self.world.busy:
                continue  # its start (or poll) returns first: then its handle is known
            self.calls.run(
                workload_id,
                "stop" if phase != "Resuming" else "stop before resuming",
                lambda i=workload_id, p=phase, h=handle, b=backend: self._stop_then_end(i, p, h, b),
            )

    def _stop_then_end(self, workload_id: str, phase: str, handle: str | None, name: str) -> None:
        if handle:
            self.world.backends.named(name).cancel(handle)
        act(self.world, workload_id, lambda s, w: end_stop(s, w, phase))


def end_stop(s: Session, w: Workload, phase: str) -> None:
    """The backend stopped what ran: the phase the stop was for, if still wanted.  A
    suspend and a resume each recorded while the other's stop ran change only the
    wish (``desired_phase``): a suspend's stop then ends Stopped and resumes, a
    resume's ends Stopped."""
    if w.phase != phase:
        return  # the user changed their mind meanwhile (a delete during a suspend)
    if phase == "Resuming" and w.desired_phase == "Running":
        phases.transition(s, w, "Pending", reason="Resumed")
        return
    for pod in w.pods:
        if pod.phase in phases.POD_LIVE:
            phases.transition_pod(s, pod, "Stopped")
    if phase == "Deleting":
        phases.transition(s, w, "Deleted", reason="Deleted")
        return
    phases.transition(s, w, "Stopped", reason="Suspended")
    if w.desired_phase == "Running":  # resumed while it stopped
        phases.transition(s, w, "Resuming", reason="ResumeRequested")

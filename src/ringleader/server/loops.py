"""Background loops: act on recorded intent and bring backend state back.

Each tick is load -> process -> apply: read what needs action in one short
transaction, do the backend I/O with no transaction open, then write the
outcome in another (re-reading the row, since a user may have acted in
between).  Every phase change goes through ``phases.transition``.

- schedule:  Pending (desired Running) -> sched.schedule over a snapshot of
             nodes, projects and workloads -> preempt (backend.cancel ->
             Pending, Preempted event), place (backend.submit with the pods'
             bindings -> Initializing), or note why not (Unschedulable)
- reconcile: Initializing/Running/Degraded/Unknown -> backend.poll -> phases, pods;
             a Failed gang whose restarts are the server's (SSH nodes) goes
             back to Pending while attempts are left, so the scheduler places
             it on nodes that answer
- node lost: Initializing/Running/... with a live pod on a NotReady node ->
             backend.cancel -> Pending (an attempt used; NodeLost event), or
             Failed once backoffLimit is spent: fail fast, never hang
- stop:      Stopping -> backend.cancel -> Stopped
- delete:    Deleting -> backend.cancel -> Deleted (row kept, deleted_at set)
- resume:    Resuming -> Pending (a fresh start; attempts continue counting)
- linger:    Completed/Failed with pods still Running (cleanPodPolicy None)
             -> backend.poll -> those pods' phases, until they end
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, selectinload

from ringleader import sched
from ringleader.sched.model import Strategy
from ringleader.server import phases
from ringleader.server.backends.base import Backend, BackendRequest, BackendStatus, PodPlacement
from ringleader.server.db import Database
from ringleader.server.models import Node as NodeRow
from ringleader.server.models import Pod, Workload
from ringleader.server.scheduling import LINGERING, asks, gpu_json, lingering, load_snapshot
from ringleader.spec import WorkloadSpec

log = logging.getLogger("ringleader.server.loops")
POLLED = ("Initializing", "Running", "Degraded", "Unknown")
ACTED_ON = ("Pending", "Resuming", "Stopping", "Deleting", *POLLED)
MIN_TICK_GAP_S = 0.05
RESCHEDULE_S = 2.0  # a cycle with nothing changed in the workloads, at most this often
POD_LIVE = ("Pending", "Running", "Unknown")  # what a stop or a preemption stops
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
        database: Database,
        backend: Backend,
        runs_dir: Path,
        interval_s: float = 0.25,
        strategy: Strategy = "binpack",
    ) -> None:
        self.sessions, self.readers = database.writer, database.reader
        self.backend = backend
        self.runs_dir = runs_dir
        self.interval_s = interval_s
        self.strategy = strategy
        self._scheduled_over: frozenset[tuple[str, str]] = frozenset()
        self._scheduled_at = 0.0
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
            started = time.monotonic()
            try:
                self.tick()
            except Exception:  # a bad tick must not end the loop; the next one retries
                log.exception("loop tick failed")
            self.wake.wait(self.interval_s)
            # A burst of submissions wakes the loops once per request: gather
            # them into one tick at most every MIN_TICK_GAP_S instead.
            self._stop.wait(max(0.0, MIN_TICK_GAP_S - (time.monotonic() - started)))
            self.wake.clear()

    # ----- one pass --------------------------------------------------------
    def tick(self) -> None:
        with self.readers() as s:
            not_ready = dict(
                s.execute(
                    select(NodeRow.name, NodeRow.message).where(NodeRow.ready.is_(False))
                ).all()
            )
            workloads = s.scalars(
                select(Workload)
                .options(selectinload(Workload.pods))
                .where(
                    Workload.deleted_at.is_(None),
                    or_(
                        Workload.phase.in_(ACTED_ON),
                        lingering() & Workload.handle.is_not(None),
                    ),
                )
            ).all()
        waiting = any(w.phase == "Pending" and w.desired_phase == "Running" for w in workloads)
        # A cycle over the same workloads in the same phases decides the same, so run
        # one when something changed, else only every RESCHEDULE_S (quotas, nodes).
        seen = frozenset((w.id, w.phase) for w in workloads)
        if waiting and (
            seen != self._scheduled_over or time.monotonic() - self._scheduled_at >= RESCHEDULE_S
        ):
            self._scheduled_over, self._scheduled_at = seen, time.monotonic()
            self.schedule()
        for w in workloads:  # detached copies: what the rows held when read
            if w.phase == "Pending":
                continue  # the scheduling cycle above placed it or said why not
            lost = {p.node: not_ready[p.node] for p in w.pods
                    if p.node in not_ready and p.phase in POD_LIVE}  # fmt: skip
            if lost and w.phase in POLLED:
                self._node_lost(w, lost)
            elif (w.phase in POLLED or w.phase in LINGERING) and w.handle:
                status = self.backend.poll(w.handle)
                if status_changes(w, status):  # most polls change nothing: no write
                    self._apply_status(w.id, status)
            elif w.phase in ("Stopping", "Deleting"):
                if w.handle:
                    self.backend.cancel(w.handle)
                self._finish_stop(w.id, w.phase)
            elif w.phase == "Resuming":
                if w.handle:  # pods left running by the last run (cleanPodPolicy None)
                    self.backend.cancel(w.handle)
                self._act(w.id, lambda s, w: phases.transition(s, w, "Pending", reason="Resumed"))

    def _act(self, workload_id: str, change: Callable[[Session, Workload], object]) -> None:
        with self.sessions() as s, s.begin():
            workload = s.get(Workload, workload_id)
            if workload is not None:
                change(s, workload)

    # ----- scheduling -----------------------------------------------------
    def schedule(self) -> None:
        """One scheduling cycle: snapshot, ``sched.schedule``, apply the decisions.

        Preemptions first (their pods are stopped before anything is placed on
        what they held), then placements, then the pending reasons.
        """
        with self.readers() as s:
            loaded = load_snapshot(s, self.strategy)
        if not loaded.waiting:
            return
        decisions = sched.schedule(loaded.snapshot)
        for preemption in decisions.preemptions:
            if self._still_waiting(preemption.for_workload):  # not deleted since the snapshot
                self._preempt(preemption.workload, loaded.readable(preemption.reason))
        for placement in decisions.placements:
            row = loaded.waiting.get(placement.workload)
            if row is not None:
                self._start(row, placement, loaded.nodes)
        notes = {}
        for pending in decisions.pending:
            row = loaded.waiting.get(pending.workload)
            reason = loaded.readable(pending.reason)
            if row is not None and (row.phase_reason, row.phase_message) != (
                "Unschedulable",
                reason,
            ):
                notes[row.id] = reason
        if notes:
            self._note_pending(notes)

    def _note_pending(self, reasons: dict[str, str]) -> None:
        """Why the scheduler left these Pending, in one write. The reason is kept
        current (its counts change); an event marks only the first time."""
        with self.sessions() as s, s.begin():
            for w in s.scalars(select(Workload).where(Workload.id.in_(list(reasons)))):
                if w.phase != "Pending":
                    continue
                if w.phase_reason != "Unschedulable":
                    phases.record_event(
                        s, w, "Unschedulable", reason="Unschedulable", message=reasons[w.id]
                    )
                w.phase_reason, w.phase_message = "Unschedulable", reasons[w.id]

    def _still_waiting(self, workload_id: str) -> bool:
        with self.readers() as s:
            row = s.execute(
                select(Workload.phase, Workload.desired_phase).where(Workload.id == workload_id)
            ).first()
        return row is not None and tuple(row) == ("Pending", "Running")

    def _preempt(self, workload_id: str, reason: str) -> None:
        with self.readers() as s:
            handle = s.scalar(select(Workload.handle).where(Workload.id == workload_id))
        if handle:
            self.backend.cancel(handle)

        def back_to_pending(s: Session, w: Workload) -> None:
            if w.phase not in POLLED:
                return  # it ended or the user acted meanwhile
            for pod in w.pods:
                if pod.phase in POD_LIVE:
                    phases.transition_pod(s, pod, "Stopped", reason="Preempted")
            phases.record_event(s, w, "Preempted", reason="Preempted", message=reason)
            phases.transition(s, w, "Pending", reason="Preempted", message=reason)

        self._act(workload_id, back_to_pending)

    def _node_lost(self, w: Workload, lost: dict[str, str]) -> None:
        """Its pods on ``lost`` nodes (name -> why NotReady) cannot be reached: stop the
        rest of the gang everywhere, then restart it through the scheduler or fail it."""
        if w.handle:
            self.backend.cancel(w.handle)
        reason = "; ".join(f"node {n} is NotReady ({lost[n] or 'gone'})" for n in sorted(lost))

        def requeue(s: Session, w: Workload) -> None:
            if w.phase not in POLLED:
                return  # the user acted meanwhile
            for pod in w.pods:
                if pod.phase in POD_LIVE:
                    ended = "Failed" if pod.node in lost else "Stopped"
                    phases.transition_pod(s, pod, ended, reason="NodeLost")
            phases.record_event(s, w, "NodeLost", reason="NodeLost", message=reason)
            restart_or_fail(s, w, reason, "NodeLost")

        self._act(w.id, requeue)

    def _start(self, w: Workload, placement: sched.Placement, nodes: dict[str, NodeRow]) -> None:
        """Start a placed workload on the backend, then record its pods' bindings."""
        spec = WorkloadSpec.model_validate(w.spec)
        requests = {r.name: r for r in asks(w).requests}
        bound = {
            b.pod: PodPlacement(
                node=b.node,
                node_kind=nodes[b.node].kind if b.node in nodes else "local",
                gpus=b.gpus,
                cpu_cores=requests[b.pod].cpu_cores if b.pod in requests else 0.0,
                ssh=nodes[b.node].ssh if b.node in nodes else "",
                address=nodes[b.node].address if b.node in nodes else "",
            )
            for b in placement.pods
        }
        request = BackendRequest(
            workload_id=w.id,
            name=w.name,
            project=w.project.name if w.project else w.project_id,
            spec=spec,
            run_dir=str(self.runs_dir / w.id),
            attempt_offset=w.attempt,
            placements=bound,
        )
        claimed: list[bool] = []

        def claim(s: Session, w: Workload) -> None:
            """Bind the pods and leave Pending before anything starts, in one write:
            a workload deleted or suspended since the snapshot is not started."""
            if w.phase != "Pending" or w.desired_phase != "Running":
                return
            for pod in w.pods:  # a resumed or preempted workload's pods start over
                if pod.phase in phases.POD_ENDED:
                    phases.restart_pod(s, pod, attempt=w.attempt, reason="Rescheduled")
            pods = {p.name: p for p in w.pods}
            for name, role, index in spec.pod_layout(w.name):
                pod = pods.get(name)
                if pod is None:
                    pod = Pod(workload_id=w.id, name=name, role=role, index=index, ranks=[])
                    s.add(pod)
                where = bound.get(name)
                pod.node = where.node if where else ""
                pod.gpus = gpu_json(where.gpus) if where else []
            phases.transition(
                s,
                w,
                "Initializing",
                reason="Scheduled",
                message=f"placed on {_where(bound)}; started by {self.backend.name}",
            )
            claimed.append(True)

        self._act(w.id, claim)
        if not claimed:
            return
        Path(request.run_dir).mkdir(parents=True, exist_ok=True)
        try:
            handle = self.backend.submit(request)
        except Exception as exc:  # the backend refused: the workload fails with its reason
            reason = str(exc)
            self._act(
                w.id,
                lambda s, w: phases.transition(
                    s, w, "Failed", reason="SubmitFailed", message=reason
                ),
            )
            return

        def record(s: Session, w: Workload) -> None:
            # Whatever the user did meanwhile (delete, suspend) the next tick does
            # with this handle: the pods that just started are found and stopped.
            w.handle = handle

        try:
            self._act(w.id, record)
        except Exception:  # started but not recorded: nothing could ever stop it
            self.backend.cancel(handle)
            raise

    def _apply_status(self, workload_id: str, status: BackendStatus) -> None:
        def apply(s: Session, w: Workload) -> None:
            if w.phase not in POLLED and w.phase not in LINGERING:
                return  # the user asked for something else meanwhile
            w.attempt = max(w.attempt, status.attempt)
            pods = {p.name: p for p in w.pods}
            if status.phase == "Failed" and status.server_restarts and w.phase in POLLED:
                for ps in status.pods:
                    pod = pods.get(ps.name)
                    if pod is not None and pod.phase in POD_LIVE:
                        ended = "Failed" if ps.phase == "Failed" else "Stopped"
                        phases.transition_pod(s, pod, ended, exit_code=ps.exit_code)
                restart_or_fail(s, w, status.message or "the gang failed", "Failed")
                return
            for ps in status.pods:
                pod = pods.get(ps.name)
                if pod is None:
                    continue
                target = _POD_PHASE.get(ps.phase, "Unknown")
                if ps.attempt > pod.attempt:
                    phases.restart_pod(
                        s, pod, attempt=ps.attempt, reason="GangRestarted", keep_binding=True
                    )
                pod.node, pod.ranks = pod.node or ps.node, list(ps.ranks)
                if pod.phase != target:
                    phases.transition_pod(s, pod, target, exit_code=ps.exit_code)
            if status.phase in phases.WORKLOAD_TRANSITIONS[w.phase]:
                phases.transition(s, w, status.phase, reason=status.phase, message=status.message)

        self._act(workload_id, apply)

    def _finish_stop(self, workload_id: str, phase: str) -> None:
        def finish(s: Session, w: Workload) -> None:
            for pod in w.pods:
                if pod.phase in POD_LIVE:
                    phases.transition_pod(s, pod, "Stopped")
            if phase == "Stopping" and w.phase == "Stopping":
                phases.transition(s, w, "Stopped", reason="Suspended")
            elif phase == "Deleting" and w.phase == "Deleting":
                phases.transition(s, w, "Deleted", reason="Deleted")

        self._act(workload_id, finish)


def restart_or_fail(s: Session, w: Workload, reason: str, cause: str) -> None:
    """A gang whose restarts are the server's ended an attempt: back to the
    scheduler with the next attempt, or Failed once ``backoffLimit`` is spent."""
    limit = WorkloadSpec.model_validate(w.spec).spec.backoff_limit
    first, _, rest = reason.partition("\n")  # one line, then the root-cause text
    if w.attempt < limit:
        w.attempt += 1
        message = (
            f"{first}; restarting on the nodes that answer (attempt {w.attempt + 1} of {limit + 1})"
        )
        phases.transition(s, w, "Pending", reason=cause, message=message)
    else:
        message = f"{first}; no restarts left (backoffLimit {limit})" + (rest and f"\n{rest}")
        phases.transition(s, w, "Failed", reason=cause, message=message)


def status_changes(workload: Workload, status: BackendStatus) -> bool:
    """Whether ``_apply_status`` would write anything for ``status``.

    Checked on a read snapshot first, so that the loops take the write lock
    only for real changes (polling every running workload each tick would
    otherwise queue a write transaction per workload per tick).
    """
    if status.attempt > workload.attempt:
        return True
    if status.phase != workload.phase and status.phase in phases.WORKLOAD_TRANSITIONS.get(
        workload.phase, ()
    ):
        return True
    pods = {p.name: p for p in workload.pods}
    for ps in status.pods:
        pod = pods.get(ps.name)
        if pod is None:
            continue
        if (
            ps.attempt > pod.attempt
            or _POD_PHASE.get(ps.phase, "Unknown") != pod.phase
            or (ps.node and not pod.node)
            or list(ps.ranks) != list(pod.ranks or [])
        ):
            return True
    return False


def _where(bound: dict[str, PodPlacement]) -> str:
    """``sim-0 (GPU 0, 1), sim-1 (GPU 0 x0.5)`` for the Scheduled message."""
    by_node: dict[str, list[str]] = {}
    for placement in bound.values():
        gpus = by_node.setdefault(placement.node, [])
        gpus += [f"{g.index}" + ("" if g.share >= 1 else f" x{g.share:g}") for g in placement.gpus]
    return ", ".join(
        node + (f" (GPU {', '.join(gpus)})" if gpus else "") for node, gpus in by_node.items()
    )

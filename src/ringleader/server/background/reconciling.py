"""Reconciling: what runs -> ``backend.poll`` -> phases and pods, through the door.

- Initializing/Running/Degraded/Unknown -> poll -> ``phases.observe`` (the
  door decides what the backend's phase means: a Stopped nobody asked for
  fails the run with its reason) and each pod's phase; a backend that does
  not restart gangs in place hands a failed attempt back: Pending with the
  next attempt (the scheduler places the gang on nodes that answer), or
  Failed once ``backoffLimit`` is spent;
- node lost: a live pod on a NotReady node -> the backend stops the gang
  everywhere -> the same restart-or-fail, with a NodeLost event;
- linger: Completed/Failed with pods still Running (cleanPodPolicy None) ->
  poll -> those pods' phases, until they end.

Pods' measures (peak memory, CPU time from their cgroups) and isolation are
written with the pod's other changes and once more when it has ended (the
final figures); a rise alone while it runs does not take the write lock.

Invariant: a poll that would change nothing writes nothing (checked on the
read snapshot), so polling every running workload costs no write lock.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, selectinload

from ringleader.server import phases
from ringleader.server.backends.base import Backend, BackendStatus, PodStatus
from ringleader.server.background.pipeline import Pipeline, act
from ringleader.server.engine_pools import ENGINE_KINDS, is_pool_node
from ringleader.server.models import Node as NodeRow
from ringleader.server.models import Pod as PodRow
from ringleader.server.models import Workload
from ringleader.server.snapshot import lingering
from ringleader.spec import WorkloadSpec


def pod_phase(native: str) -> str:
    """A backend's pod phase as ours: the pod table's names, anything else Unknown."""
    return native if native in phases.POD_PHASES else phases.UNKNOWN


class Reconciling(Pipeline):
    name = "reconciling"

    def run_once(self) -> None:
        with self.world.readers() as s:
            not_ready = dict(  # an engine's own nodes (Slurm's) are the engine's to handle
                s.execute(
                    select(NodeRow.name, NodeRow.message).where(
                        NodeRow.ready.is_(False), NodeRow.kind.not_in(ENGINE_KINDS)
                    )
                ).all()
            )
            workloads = s.scalars(
                select(Workload)
                .options(selectinload(Workload.pods))
                .where(
                    Workload.deleted_at.is_(None),
                    Workload.handle.is_not(None),
                    or_(Workload.phase.in_(phases.POLLED), lingering()),
                )
            ).all()
        for w in workloads:  # detached copies: what the rows held when read
            if w.id in self.world.busy:
                continue  # a start, stop or poll of it has not returned yet
            backend = self.world.backends.named(w.backend)
            lost = {p.node: not_ready[p.node] for p in w.pods
                    if p.node in not_ready and p.phase in phases.POD_LIVE}  # fmt: skip
            if lost and w.phase in phases.POLLED:
                self.calls.run(w.id, "stop (node lost)", lambda w=w, b=backend, lost=lost: (
                    self._node_lost(b, w, lost)))  # fmt: skip
            else:
                self.calls.run(w.id, "poll", lambda w=w, b=backend: self._poll(b, w))

    def _poll(self, backend: Backend, w: Workload) -> bool:
        """Poll and write what changed; False when nothing did (most polls)."""
        status = backend.poll(w.handle or "")
        if status.phase == "Pending" and w.phase in phases.POLLED:
            self._taken_back(backend, w, status)
            return True
        if not status_changes(w, status):
            return False
        act(self.world, w.id, lambda s, row: apply_status(s, row, status, backend))
        return True

    def _taken_back(self, backend: Backend, w: Workload, status: BackendStatus) -> None:
        """The engine took the run back (a Slurm preemption or requeue): end what is left
        of it, and queue the workload again, as a preemption by ringleader's scheduler
        does; its next start resumes from its checkpoint."""
        if w.handle:
            backend.cancel(w.handle)
        reason = status.reason or "Preempted"

        def requeue(s: Session, w: Workload) -> None:
            if w.phase not in phases.POLLED:
                return  # the user acted meanwhile
            for pod in w.pods:
                if pod.phase in phases.POD_LIVE:
                    phases.transition_pod(s, pod, "Stopped", reason=reason)
            phases.record_event(s, w, reason, reason=reason, message=status.message)
            phases.transition(s, w, "Pending", reason=reason, message=status.message)

        act(self.world, w.id, requeue)

    def _node_lost(self, backend: Backend, w: Workload, lost: dict[str, str]) -> None:
        """Its pods on ``lost`` nodes (name -> why NotReady) cannot be reached: stop the
        rest of the gang everywhere, then restart it through the scheduler or fail it."""
        if w.handle:
            backend.cancel(w.handle)
        reason = "; ".join(f"node {n} is NotReady ({lost[n] or 'gone'})" for n in sorted(lost))

        def requeue(s: Session, w: Workload) -> None:
            if w.phase not in phases.POLLED:
                return  # the user acted meanwhile
            for pod in w.pods:
                if pod.phase in phases.POD_LIVE:
                    ended = "Failed" if pod.node in lost else "Stopped"
                    phases.transition_pod(s, pod, ended, reason="NodeLost")
            phases.record_event(s, w, "NodeLost", reason="NodeLost", message=reason)
            phases.end_attempt(s, w, reason, "NodeLost", _backoff_limit(w))

        act(self.world, w.id, requeue)


def _backoff_limit(w: Workload) -> int:
    return WorkloadSpec.from_stored(w.spec).spec.backoff_limit


def apply_status(s: Session, w: Workload, status: BackendStatus, backend: Backend) -> None:
    """Write what a poll found: pods' phases, then the workload's through the door."""
    if w.phase not in phases.POLLED and w.phase not in phases.LINGERING:
        return  # the user asked for something else meanwhile
    phases.count_attempts(w, status.attempt)
    pods = {p.name: p for p in w.pods}
    if (
        status.phase == "Failed"
        and not backend.capabilities.restarts_in_place
        and w.phase in phases.POLLED
    ):
        for ps in status.pods:
            pod = pods.get(ps.name)
            if pod is not None and pod.phase in phases.POD_LIVE:
                ended = "Failed" if ps.phase == "Failed" else "Stopped"
                phases.transition_pod(s, pod, ended, exit_code=ps.exit_code)
        phases.end_attempt(s, w, status.message or "the gang failed", "Failed", _backoff_limit(w))
        return
    ended = ended_time(status)
    for ps in status.pods:
        pod = pods.get(ps.name)
        if pod is None:
            continue
        target = pod_phase(ps.phase)
        if ps.attempt > pod.attempt:
            phases.restart_pod(
                s, pod, attempt=ps.attempt, reason="GangRestarted", keep_binding=True
            )
        pod.node, pod.ranks = placed_node(pod.node, ps.node), list(ps.ranks)
        record_usage(pod, ps)
        if pod.phase != target:
            phases.transition_pod(s, pod, target, exit_code=ps.exit_code, now=ended)
    if status.reason and status.phase == w.phase:  # why it waits changed (Slurm's Reason)
        phases.note_pending(s, w, status.reason, status.message)
    phases.observe(s, w, status.phase, message=status.message, now=ended)


def placed_node(bound: str, seen: str) -> str:
    """The pod's node: the scheduler's binding, or where the backend saw it when the
    binding names none (or only a pool whose engine places pods: Slurm's node)."""
    return seen if seen and (not bound or is_pool_node(bound)) else bound


def ended_time(status: BackendStatus) -> datetime | None:
    """When the run ended by its own record (so a server that was down when it ended
    stamps completedAt with the run's end, not with when it noticed); None: now."""
    if status.ended_at is None or status.phase not in phases.WORKLOAD_ENDED:
        return None
    try:
        return datetime.fromtimestamp(status.ended_at, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def record_usage(pod: PodRow, ps: PodStatus) -> None:
    """The backend's measures of the pod, where it has them (a later poll that has
    none, after a restart of the server say, keeps what was recorded)."""
    if ps.isolation:
        pod.isolation = ps.isolation
    if ps.peak_memory_bytes is not None:
        pod.peak_memory_bytes = ps.peak_memory_bytes
    if ps.cpu_seconds is not None:
        pod.cpu_seconds = ps.cpu_seconds


def usage_changes(pod: PodRow, ps: PodStatus) -> bool:
    """Whether to write the pod's measures: a new isolation, or final figures."""
    if ps.isolation and ps.isolation != pod.isolation:
        return True
    ended = pod_phase(ps.phase) not in phases.POD_LIVE
    return ended and (
        (ps.peak_memory_bytes is not None and ps.peak_memory_bytes != pod.peak_memory_bytes)
        or (ps.cpu_seconds is not None and ps.cpu_seconds != pod.cpu_seconds)
    )


def status_changes(workload: Workload, status: BackendStatus) -> bool:
    """Whether ``apply_status`` would write anything for ``status``.

    Checked on a read snapshot first, so that polls take the write lock only
    for real changes (polling every running workload each pass would
    otherwise queue a write transaction per workload per pass).
    """
    if status.attempt > workload.attempt or phases.would_observe(workload, status.phase):
        return True
    if (
        status.reason
        and status.phase == workload.phase
        and (status.reason, status.message) != (workload.phase_reason, workload.phase_message)
    ):
        return True
    pods = {p.name: p for p in workload.pods}
    for ps in status.pods:
        pod = pods.get(ps.name)
        if pod is None:
            continue
        if (
            ps.attempt > pod.attempt
            or pod_phase(ps.phase) != pod.phase
            or placed_node(pod.node, ps.node) != pod.node
            or list(ps.ranks) != list(pod.ranks or [])
            or usage_changes(pod, ps)
        ):
            return True
    return False

"""What a poll changes, as a value: ``status_diff`` (pure) and ``apply_diff`` (writes).

Why one decision: the reconciler reads every running workload each pass and must
take the write lock only when a poll changes something.  That check used to be a
second copy of the update (``status_changes`` beside ``apply_status``), and the
two could disagree: a check that said "changed" for a reason the update then
ignored cost a write transaction every pass, one that said "unchanged" lost the
change.  Now the check is ``bool(status_diff(...))`` on the read snapshot, and the
write transaction computes the diff again on the fresh row and applies exactly it.

Nomenclature: a *pod change* is what one pod of the poll changes (a restart, its
node, ranks, measures, phase); the *diff* is the pod changes plus the workload's
(its attempt count, a failed attempt to end, why it waits, the phase the door
takes from the backend's).  Measures that merely rose while a pod runs are
written with its other changes, never as a change of their own (see
``reconciling``'s docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy.orm import Session

from ringleader.server import phases
from ringleader.server.backends.base import BackendStatus, PodStatus
from ringleader.server.engine_pools import is_pool_node
from ringleader.server.models import Pod as PodRow
from ringleader.server.models import Workload
from ringleader.spec import WorkloadSpec


def pod_phase(native: str) -> str:
    """A backend's pod phase as ours: the pod table's names, anything else Unknown."""
    return native if native in phases.POD_PHASES else phases.UNKNOWN


def placed_node(bound: str, seen: str) -> str:
    """The pod's node: the scheduler's binding, or where the backend saw it when the
    binding names none (or only a pool whose engine places pods: Slurm's node)."""
    return seen if seen and (not bound or is_pool_node(bound)) else bound


@dataclass(frozen=True)
class PodChange:
    """One pod's part of a poll (``status``: what the backend said of it)."""

    status: PodStatus
    restarted: bool  # a new attempt of the gang restarted it in place
    moved: bool  # its node or ranks differ
    phase: str  # the phase it should be in (checked again after a restart)
    phase_differs: bool
    measures: bool  # new isolation, or final measures that differ

    def __bool__(self) -> bool:
        return self.restarted or self.moved or self.phase_differs or self.measures


@dataclass(frozen=True)
class StatusDiff:
    """A poll's changes to one workload; false when it changes nothing."""

    attempt_grows: bool = False
    gang_failed: bool = False  # an attempt ended whose restart is the server's
    waiting: bool = False  # why it waits changed (Slurm's Reason)
    observed: bool = False  # the door takes a phase from the backend's
    # Its image arrived while no poll looked: the Pulled event, before it runs.
    pulled_late: bool = False
    pods: tuple[PodChange, ...] = ()

    def __bool__(self) -> bool:
        changed = self.attempt_grows or self.gang_failed or self.waiting or self.observed
        changed = changed or self.pulled_late
        return changed or any(self.pods)


NOTHING = StatusDiff()


def status_diff(w: Workload, status: BackendStatus, restarts_in_place: bool) -> StatusDiff:
    """What ``status`` changes of ``w`` (its row and pods, as read); writes nothing."""
    if w.phase not in phases.POLLED and w.phase not in phases.LINGERING:
        return NOTHING  # the user asked for something else meanwhile
    rows = {p.name: p for p in w.pods}
    changes = tuple(_pod_change(rows[ps.name], ps) for ps in status.pods if ps.name in rows)
    gang_failed = status.phase == "Failed" and not restarts_in_place and w.phase in phases.POLLED
    reason, message = (
        phases.storable(status.reason, phases.REASON_CHARS),
        phases.storable(status.message),
    )
    waiting = (
        bool(status.reason)
        and status.phase == w.phase
        and w.phase in phases.WAITING_WITH_REASON
        and (reason, message) != (w.phase_reason, w.phase_message)
    )
    pulled_late = (
        bool(status.pulled)
        and w.phase == "Initializing"
        and status.phase != w.phase
        and w.phase_reason != "Pulled"
    )
    return StatusDiff(
        attempt_grows=status.attempt > w.attempt,
        gang_failed=gang_failed,
        waiting=waiting and not gang_failed,
        pulled_late=pulled_late and not gang_failed,
        observed=not gang_failed and phases.observed_move(w.phase, status.phase) is not None,
        pods=changes,
    )


def _pod_change(pod: PodRow, ps: PodStatus) -> PodChange:
    restarted = ps.attempt > pod.attempt
    # A pod's end is recorded once: a later poll that words it otherwise (a supervisor
    # killed before its final record, whose pods Slurm's end calls all Stopped) keeps it.
    kept = pod.phase in phases.POD_ENDED and not restarted
    target = pod.phase if kept else pod_phase(ps.phase)
    moved = placed_node(pod.node, ps.node) != pod.node or list(ps.ranks) != list(pod.ranks or [])
    return PodChange(
        status=ps,
        restarted=restarted,
        moved=moved,
        phase=target,
        phase_differs=target != pod.phase,
        measures=usage_changes(pod, ps),
    )


def usage_changes(pod: PodRow, ps: PodStatus) -> bool:
    """Whether to write the pod's measures: a new isolation, or final figures."""
    if ps.isolation and ps.isolation != pod.isolation:
        return True
    ended = pod_phase(ps.phase) not in phases.POD_LIVE
    return ended and (
        (ps.peak_memory_bytes is not None and ps.peak_memory_bytes != pod.peak_memory_bytes)
        or (ps.cpu_seconds is not None and ps.cpu_seconds != pod.cpu_seconds)
    )


def record_usage(pod: PodRow, ps: PodStatus) -> None:
    """The backend's measures of the pod, where it has them (a later poll that has
    none, after a restart of the server say, keeps what was recorded)."""
    if ps.isolation:
        pod.isolation = ps.isolation
    if ps.peak_memory_bytes is not None:
        pod.peak_memory_bytes = ps.peak_memory_bytes
    if ps.cpu_seconds is not None:
        pod.cpu_seconds = ps.cpu_seconds


def apply_diff(s: Session, w: Workload, status: BackendStatus, diff: StatusDiff) -> None:
    """Write ``diff`` (computed on this very row): pods first, then the workload's
    phase through the door."""
    if not diff:
        return
    phases.count_attempts(w, status.attempt)
    rows = {p.name: p for p in w.pods}
    if diff.gang_failed:
        for change in diff.pods:
            pod = rows[change.status.name]
            if pod.phase in phases.POD_LIVE:
                ended = "Failed" if change.status.phase == "Failed" else "Stopped"
                phases.transition_pod(s, pod, ended, exit_code=change.status.exit_code)
        limit = WorkloadSpec.from_stored(w.spec).spec.backoff_limit
        why = status.message or "the gang failed"
        phases.end_attempt(s, w, why, "Failed", limit, restart=not status.lasting)
        return
    ended = ended_time(status)
    for change in diff.pods:
        pod, ps = rows[change.status.name], change.status
        if change.restarted:
            phases.restart_pod(
                s, pod, attempt=ps.attempt, reason="GangRestarted", keep_binding=True
            )
        pod.node, pod.ranks = placed_node(pod.node, ps.node), list(ps.ranks)
        record_usage(pod, ps)
        if pod.phase != change.phase:  # after a restart too: it begins again
            phases.transition_pod(s, pod, change.phase, exit_code=ps.exit_code, now=ended)
    if diff.waiting:
        phases.note_pending(s, w, status.reason, status.message)
    if diff.pulled_late:
        phases.note_pending(s, w, "Pulled", status.pulled)
    if diff.observed:
        phases.observe(s, w, status.phase, message=status.message, now=ended)


def ended_time(status: BackendStatus) -> datetime | None:
    """When the run ended by its own record (so a server that was down when it ended
    stamps completedAt with the run's end, not with when it noticed); None: now."""
    if status.ended_at is None or status.phase not in phases.WORKLOAD_ENDED:
        return None
    try:
        return datetime.fromtimestamp(status.ended_at, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None

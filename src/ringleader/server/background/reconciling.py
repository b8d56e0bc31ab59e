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
read snapshot), so polling every running workload costs no write lock.  What a
poll changes is one value, ``status_diff`` (its module): its truth is that check,
and the write transaction applies it as computed again on the fresh row.

The read snapshot is kept between passes (``PolledRows``): each pass reads only
a stamp per polled workload (its row's and its pods' ``updated_at``, and how many
pods it has) and loads again just the rows whose stamp moved, since loading
every running workload with its pods as objects was most of a pass (thousands of
them, nearly all unchanged).  Every write to either table moves the stamp
(``updated_at`` is set on each update); a full load every ``FULL_LOAD_S`` bounds
what a clock stepping back could hide.  A row that did not change is polled every
``POLL_EVERY_S``, one that did in the next pass.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from itertools import islice
from typing import Any

from sqlalchemy import String, func, or_, select, type_coerce
from sqlalchemy.orm import Session, defer, selectinload

from ringleader.server import phases
from ringleader.server.backends.base import Backend, BackendStatus
from ringleader.server.background.pipeline import Pipeline, World, act
from ringleader.server.background.status_diff import apply_diff, status_diff
from ringleader.server.engine_pools import ENGINE_KINDS
from ringleader.server.models import Node as NodeRow
from ringleader.server.models import Pod, Workload
from ringleader.server.snapshot import lingering
from ringleader.spec import WorkloadSpec

FULL_LOAD_S = 60.0  # every polled row loaded afresh at least this often
POLL_EVERY_S = 1.0  # a row that did not change is polled at most this often
LOAD_CHUNK = 500  # ids per ``IN (...)`` of a partial load

Stamp = tuple[object, int, object]  # (its updated_at, its pods' count and latest)


class PolledRows:
    """The polled workloads as detached rows (pods loaded, spec deferred), kept
    between passes and loaded again only where their stamp moved."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[Stamp, Workload]] = {}
        self.moved: set[str] = set()  # the rows the last read loaded (new or changed)
        self.polled_at: dict[str, float] = {}  # when each row was last handed to a poll
        self.loaded_at = 0.0
        self.loads = 0  # rows loaded as objects, all passes together (tests count them)

    def due(self, workload_id: str, every_s: float) -> bool:
        """Whether to poll it now: its row changed since the last read, or its last
        poll is ``every_s`` old (noted as polled now when it is)."""
        now = time.monotonic()
        if workload_id in self.moved or now - self.polled_at.get(workload_id, -every_s) >= every_s:
            self.polled_at[workload_id] = now
            return True
        return False

    def read(self, s: Session) -> list[Workload]:
        polled = (
            Workload.deleted_at.is_(None),
            Workload.handle.is_not(None),
            or_(Workload.phase.in_(phases.POLLED), lingering()),
        )
        # Compared for equality only, so read as the database gives them: SQLite's
        # text parsed into datetimes was most of a pass over thousands of rows.
        updated, pods_updated = (
            type_coerce(Workload.updated_at, String),
            type_coerce(func.max(Pod.updated_at), String),
        )
        stamps: dict[str, Stamp] = {
            wid: (at, pods, pods_at)
            for wid, at, pods, pods_at in s.execute(
                select(Workload.id, updated, func.count(Pod.id), pods_updated)
                .outerjoin(Pod, Pod.workload_id == Workload.id)
                .where(*polled)
                .group_by(Workload.id, Workload.updated_at)
            )
        }  # fmt: skip
        full = time.monotonic() - self.loaded_at >= FULL_LOAD_S
        if full:
            self.loaded_at = time.monotonic()
        rows = {} if full else {w: r for w, r in self.rows.items() if w in stamps}
        moved = [w for w, stamp in stamps.items() if w not in rows or rows[w][0] != stamp]
        for chunk in _chunks(moved, LOAD_CHUNK):
            # The spec (JSON, the row's largest column) is not read here: a poll needs
            # the handle, the phase and the pods; a write that needs the spec (the
            # backoff limit of a failed gang) reads its own fresh row in ``act``.
            loaded = s.scalars(
                select(Workload)
                .options(defer(Workload.spec), selectinload(Workload.pods))
                .where(Workload.id.in_(chunk), *polled)
            ).all()
            self.loads += len(loaded)
            for w in loaded:  # a row written since its stamp was read: the next pass
                rows[w.id] = (stamps[w.id], w)  # sees a newer stamp and loads it again
        self.rows, self.moved = rows, set(moved)
        self.polled_at = {w: t for w, t in self.polled_at.items() if w in rows}
        return [rows[w][1] for w in stamps if w in rows]


def _chunks(items: Sequence[str], size: int) -> list[list[str]]:
    it = iter(items)
    return list(iter(lambda: list(islice(it, size)), []))


class Reconciling(Pipeline):
    name = "reconciling"
    # A running workload's row that did not change is polled at most this often (rows
    # that changed, and nodes gone NotReady, are acted on in the next pass): thousands
    # of running workloads were each polled every pass, a third of a core on an idle
    # server with 2,000 of them, most of it handing polls to the workers.
    poll_every_s = POLL_EVERY_S

    def __init__(self, world: World, **options: Any) -> None:
        super().__init__(world, **options)
        self.polled = PolledRows()

    def run_once(self) -> None:
        with self.world.readers() as s:
            not_ready = dict(  # an engine's own nodes (Slurm's) are the engine's to handle
                s.execute(
                    select(NodeRow.name, NodeRow.message).where(
                        NodeRow.ready.is_(False), NodeRow.kind.not_in(ENGINE_KINDS)
                    )
                ).all()
            )
            workloads = self.polled.read(s)
        for w in workloads:  # detached copies: what the rows held when read
            if w.id in self.world.busy:
                continue  # a start, stop or poll of it has not returned yet
            backend = self.world.backends.named(w.backend)
            lost = not_ready and {
                p.node: not_ready[p.node]
                for p in w.pods
                if p.node in not_ready and p.phase in phases.POD_LIVE
            }
            if lost and w.phase in phases.POLLED:
                self.calls.run(w.id, "stop (node lost)", lambda w=w, b=backend, lost=lost: (
                    self._node_lost(b, w, lost)))  # fmt: skip
            elif self.polled.due(w.id, self.poll_every_s):
                self.calls.run(w.id, "poll", lambda w=w, b=backend: self._poll(b, w))

    def _poll(self, backend: Backend, w: Workload) -> bool:
        """Poll and write what changed; False when nothing did (most polls)."""
        status = backend.poll(w.handle or "")
        if status.phase == "Pending" and w.phase in phases.POLLED:
            self._taken_back(backend, w, status)
            return True
        in_place = backend.capabilities.restarts_in_place
        if not status_diff(w, status, in_place):
            return False  # checked on the read snapshot: no write lock taken

        def apply(s: Session, row: Workload) -> None:
            apply_diff(s, row, status, status_diff(row, status, in_place))

        act(self.world, w.id, apply)
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

"""Placing: Pending workloads -> a scheduling cycle -> preemptions and starts.

- Pending (desired Running) -> ``sched.schedule`` over a snapshot of nodes,
  projects and workloads -> preempt (the victim's backend stops it, then it
  goes back to Pending with a Preempted event), place (pods bound and the
  workload Initializing in one write, then the backend chosen for the
  placement starts it and the handle is recorded), or note why not
  (Unschedulable).
- A workload placed thanks to a preemption waits for the next cycle: the
  victim's stop runs on a worker and its devices are free only once it ends.

Invariants: the claim is written before anything starts, so a workload
deleted or suspended since the snapshot never starts; a start that cannot
be recorded is cancelled, so no process is left that nothing could stop;
with ``World.accounts`` (``--run-as user``) the OS account is resolved from
the submitter's record on the start's worker (``useradd`` is I/O, never in a
transaction), and a workload with no account fails with the reason: it never
starts as the server.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader import sched
from ringleader.server import node_kinds, phases, registry
from ringleader.server.auth import issue_pod_token
from ringleader.server.backends.base import Backend, BackendRequest, PodPlacement
from ringleader.server.background.pipeline import Pipeline, World, act
from ringleader.server.models import Node as NodeRow
from ringleader.server.models import Pod, User, Workload
from ringleader.server.snapshot import gpu_json, load_snapshot, pod_asks
from ringleader.spec import WorkloadSpec

RESCHEDULE_S = 2.0  # a cycle with nothing changed in the workloads, at most this often


class Placing(Pipeline):
    name = "placing"

    def __init__(self, world: World, **options: Any) -> None:
        super().__init__(world, **options)
        self._scheduled_over: frozenset[tuple[str, str]] = frozenset()
        self._scheduled_at = 0.0
        # The same decisions as sched.schedule, reusing what did not change since
        # the last cycle (an equal snapshot: the last answer).
        self._scheduler = sched.IncrementalScheduler()

    def run_once(self) -> None:
        with self.world.readers() as s:
            seen = frozenset(
                s.execute(
                    select(Workload.id, Workload.phase).where(
                        Workload.deleted_at.is_(None),
                        Workload.phase.in_(("Pending", *phases.HOLDING)),
                    )
                ).all()
            )
        if not any(phase == "Pending" for _, phase in seen):
            return
        # A cycle over the same workloads in the same phases decides the same, so run
        # one when something changed, else only every RESCHEDULE_S (quotas, nodes).
        if seen == self._scheduled_over and time.monotonic() - self._scheduled_at < RESCHEDULE_S:
            return
        self._scheduled_over, self._scheduled_at = seen, time.monotonic()
        self.schedule()

    def schedule(self) -> None:
        """One scheduling cycle: snapshot, ``sched.schedule``, apply the decisions."""
        with self.world.readers() as s:
            loaded = load_snapshot(s, self.world.strategy)
        if not loaded.waiting:
            return
        decisions = self._scheduler.schedule(loaded.snapshot)
        waits = set()
        for preemption in decisions.preemptions:
            waits.add(preemption.for_workload)
            if self._still_waiting(preemption.for_workload):  # not deleted since the snapshot
                self._preempt(preemption.workload, loaded.readable(preemption.reason))
        notes, reach = {}, registry.Reachability(self.world.runs_dir.parent)
        for placement in decisions.placements:
            row = loaded.waiting.get(placement.workload)
            if row is None or placement.workload in waits:
                continue
            held = ""
            if reach.address:  # a server with a registry: is this image's answering?
                spec = WorkloadSpec.from_stored(row.spec)
                held = reach.why_not(spec.master().image or spec.spec.image or "")
            if held:  # a wait, not a failure: placed in a later cycle, once it answers
                if (row.phase_reason, row.phase_message) != ("ImageUnavailable", held):
                    self._note_pending({row.id: held}, "ImageUnavailable")
                continue
            self.place(row, placement, loaded.nodes)
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

    def _note_pending(self, reasons: dict[str, str], why: str = "Unschedulable") -> None:
        """Why the scheduler left these Pending, in one write."""
        with self.world.sessions() as s, s.begin():
            locked = select(Workload).where(Workload.id.in_(list(reasons))).with_for_update()
            for w in s.scalars(locked):  # as ``act``: no reason over a user's newer change
                phases.note_pending(s, w, why, reasons[w.id])

    def _still_waiting(self, workload_id: str) -> bool:
        with self.world.readers() as s:
            row = s.execute(
                select(Workload.phase, Workload.desired_phase).where(Workload.id == workload_id)
            ).first()
        return row is not None and tuple(row) == ("Pending", "Running")

    def _preempt(self, workload_id: str, reason: str) -> None:
        with self.world.readers() as s:
            row = s.execute(
                select(Workload.handle, Workload.backend).where(Workload.id == workload_id)
            ).first()
        if row is None:
            return
        handle, backend = row

        def back_to_pending(s: Session, w: Workload) -> None:
            if w.phase not in phases.POLLED:
                return  # it ended or the user acted meanwhile
            for pod in w.pods:
                if pod.phase in phases.POD_LIVE:
                    phases.transition_pod(s, pod, "Stopped", reason="Preempted")
            phases.record_event(s, w, "Preempted", reason="Preempted", message=reason)
            phases.transition(s, w, "Pending", reason="Preempted", message=reason)

        def preempt() -> None:
            if handle:
                self.world.backends.named(backend).cancel(handle)
            act(self.world, workload_id, back_to_pending)

        self.calls.run(workload_id, "preempt", preempt)

    def place(self, w: Workload, placement: sched.Placement, nodes: dict[str, NodeRow]) -> None:
        """Claim a placed workload (its pods bound, Initializing), then have the
        placement's backend start it on a worker and record the handle."""
        if w.id in self.world.busy:
            return  # its last call (a preemption's stop) has not returned yet
        spec = WorkloadSpec.from_stored(w.spec)
        requests = {r.name: r for r in pod_asks(w).requests}
        bound = {
            b.pod: PodPlacement(
                node=b.node,
                node_kind=nodes[b.node].kind if b.node in nodes else node_kinds.LOCAL,
                gpus=b.gpus,
                cpu_cores=requests[b.pod].cpu_cores if b.pod in requests else 0.0,
            )
            for b in placement.pods
        }
        backend = self.world.backends.for_placement(bound, {n: r.pool for n, r in nodes.items()})
        claimed: list[bool] = []
        pod_env: dict[str, str] = {}
        submitter: dict[str, str | None] = {}  # whose account it runs as (_run_start)

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
            w.backend, w.handle = backend.name, None
            user = s.get(User, w.created_by) if w.created_by else None
            if user is not None:
                submitter.update(name=user.name, os_user=user.os_user)
            token = self.world.server_url and issue_pod_token(s, w, self.world.pod_token_ttl_s)
            if token:
                pod_env.update(RINGLEADER_URL=self.world.server_url, RINGLEADER_TOKEN=token)
            phases.transition(
                s,
                w,
                "Initializing",
                reason="Scheduled",
                message=f"placed on {_where(bound)}; started by {backend.name}",
            )
            shared = sorted(name for name, b in bound.items() if any(g.share < 1 for g in b.gpus))
            if shared and not backend.capabilities.gpu_isolation:
                phases.record_event(
                    s,
                    w,
                    "GPUSharing",
                    reason="NotEnforced",
                    message=(
                        f"{', '.join(shared)} share GPUs; the {backend.name} backend does not "
                        "isolate GPUs, so each pod's share of device memory is kept by "
                        "ringleader.runtime (torch's per-process memory fraction), not enforced"
                    ),
                )
            claimed.append(True)

        act(self.world, w.id, claim)
        request = BackendRequest(
            workload_id=w.id,
            name=w.name,
            project=w.project.name if w.project else w.project_id,
            spec=spec,
            run_dir=str(self.world.runs_dir / w.id),
            attempt_offset=w.attempt,
            placements=bound,
            pod_env=pod_env,
        )
        if claimed:
            self.calls.run(w.id, "start", lambda: self._run_start(backend, request, submitter))

    def _run_start(
        self, backend: Backend, request: BackendRequest, submitter: dict[str, str | None]
    ) -> bool:
        """Resolve the account it runs as, start it and record the handle.  True when
        it failed instead (its resources are free again, so the pipelines should
        look); a started one wakes nobody: the next reconciling pass polls it."""
        Path(request.run_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            accounts = self.world.accounts
            if accounts is not None:  # no account: it fails with the reason, never runs as root
                account = accounts.resolve(submitter.get("name"), submitter.get("os_user"))
                request = dataclasses.replace(request, run_as=account)
            handle = backend.start(request)
        except Exception as exc:  # the backend refused: the workload fails with its reason
            reason = str(exc)
            act(
                self.world,
                request.workload_id,
                lambda s, w: (
                    phases.transition(s, w, "Failed", reason="SubmitFailed", message=reason)
                    if w.phase in phases.POLLED
                    else None
                ),
            )
            return True

        def record(s: Session, w: Workload) -> None:
            # Whatever the user did meanwhile (delete, suspend) the stopping pipeline
            # does with this handle once this call returns: its pods are stopped.
            w.handle = handle

        try:
            act(self.world, request.workload_id, record)
        except Exception:  # started but not recorded: nothing could ever stop it
            backend.cancel(handle)
            raise
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

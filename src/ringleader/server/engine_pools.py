"""Node pools whose engine places pods itself (a Slurm partition), and their nodes.

ringleader's scheduler decides *admission* for such a pool (project quotas,
fair share, the pool's whole capacity) and binds no pod to one of its
machines: the engine does (Slurm decides placement).

Nomenclature:
- *engine kind*: a node kind whose nodes an engine places work on (``slurm``);
- *pool node*: the scheduler's view of one such pool: a single node
  ``KIND:POOL`` (``slurm:default``) holding the sum of the pool's Ready nodes
  (CPUs, memory, GPUs numbered 0..N-1 across them);
- *alias*: a pod bound to the pool node keeps that binding until the engine
  says where it runs (then ``pod.node`` names the engine's node, ``rl1``);
  either name counts against the pool node.

Invariants: ``fold`` is pure (rows in, rows and aliases out; the pool node is
a transient row, never added to a session); ``sync_engine_nodes`` makes the
rows of one kind exactly what the engine reported and writes only changes;
``EngineNodes`` re-reads each engine every ``every_s`` on its own thread and
never holds a transaction while it asks the engine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.server import node_kinds
from ringleader.server.backends.base import Backend
from ringleader.server.db import Database
from ringleader.server.inventory import NodeDecl
from ringleader.server.models import Node

log = logging.getLogger("ringleader.server.engine_pools")
ENGINE_KINDS = node_kinds.ENGINE
EVERY_S = 5.0


def pool_node_name(kind: str, pool: str) -> str:
    """``slurm:default``: a name no registered node can have (node names have no ``:``)."""
    return f"{kind}:{pool}"


def fold(rows: Iterable[Node]) -> tuple[dict[str, Node], dict[str, Node]]:
    """(nodes the scheduler sees by name, alias -> pool node): engine pools folded."""
    nodes: dict[str, Node] = {}
    pools: dict[str, list[Node]] = {}
    for row in rows:
        if row.kind in ENGINE_KINDS:
            pools.setdefault(pool_node_name(row.kind, row.pool), []).append(row)
        else:
            nodes[row.name] = row
    alias: dict[str, Node] = {}
    for name, members in sorted(pools.items()):
        ready = [m for m in members if m.ready]
        gpus = [g for m in ready for g in (m.gpus or [])]
        pool_node = Node(
            name=name,
            kind=members[0].kind,
            pool=members[0].pool,
            address="",
            cpu_cores=sum(m.cpu_cores for m in ready),
            memory_bytes=sum(m.memory_bytes for m in ready),
            gpus=[
                {"index": i, "memoryBytes": int(g.get("memoryBytes") or 0)}
                for i, g in enumerate(gpus)
            ],
            labels={},
            ready=bool(ready),
            message="",
        )
        nodes[name] = pool_node
        alias.update({m.name: pool_node for m in members})
    return nodes, alias


def is_pool_node(name: str) -> bool:
    """Whether ``name`` is a pool node's (a binding to a pool, not to a machine)."""
    return ":" in name


def sync_engine_nodes(session: Session, kind: str, found: Sequence[NodeDecl]) -> bool:
    """Make the rows of ``kind`` exactly ``found``; True when anything changed."""
    rows = {n.name: n for n in session.scalars(select(Node))}
    changed = False
    wanted = {d.name for d in found}
    for name, row in rows.items():
        if row.kind == kind and name not in wanted:
            session.delete(row)
            changed = True
    for decl in found:
        row = rows.get(decl.name)
        if row is not None and row.kind != kind:
            log.warning("%s node %s is already registered as a %s node", kind, decl.name, row.kind)
            continue
        if row is None:
            row = Node(name=decl.name)
            session.add(row)
        values = {
            "kind": kind,
            "pool": decl.pool,
            "address": decl.address,
            "cpu_cores": decl.cpu_cores,
            "memory_bytes": decl.memory_bytes,
            "gpus": [dict(g) for g in decl.gpus],
            "labels": dict(decl.labels),
            "ready": decl.ready,
            "message": decl.message,
        }
        for key, value in values.items():
            if getattr(row, key, None) != value:
                setattr(row, key, value)
                changed = True
    return changed


class EngineNodes:
    """Keeps the nodes of every backend with an inventory (Slurm's) in the table."""

    def __init__(
        self,
        database: Database,
        backends: Callable[[], Iterable[Backend]],
        on_change: Callable[[], None],
        every_s: float = EVERY_S,
    ) -> None:
        self.database = database
        self.backends = backends
        self.on_change = on_change
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> None:
        """Ask each engine for its nodes (no transaction held), then write what changed."""
        for backend in list(self.backends()):
            try:
                found = backend.inventory()
            except Exception as exc:  # an engine that does not answer keeps its last rows
                log.warning("cannot read the %s backend's nodes: %s", backend.name, exc)
                continue
            if found is None:
                continue
            with self.database.writer() as s, s.begin():
                changed = sync_engine_nodes(s, backend.name, found)
            if changed:
                self.on_change()

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name="ringleader-engine-nodes", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.refresh()

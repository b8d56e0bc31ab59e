"""What only the active server does: first rows, the background loops, node watches.

A single server (SQLite, or PostgreSQL without a standby) acts from start-up to
shutdown. With a standby (``server/ha``) a server acts only while it holds the
lease: ``start`` when it takes it, ``stop`` when it loses it, and each ``start``
builds its loops anew (a stopped thread cannot be started again). Running
workloads are adopted by the first passes of the new loops: the reconciling
pipeline polls every workload the database says runs, from its backend handle
alone, whichever server started it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.server import auth, inventory, node_kinds
from ringleader.server.accounts import accounts_for
from ringleader.server.backends.base import Backend
from ringleader.server.backends.ssh import NodeBook, SSHNode
from ringleader.server.background import Background, World
from ringleader.server.background.heartbeats import NodeMonitor
from ringleader.server.config import ServerConfig
from ringleader.server.db import Database
from ringleader.server.engine_pools import EngineNodes
from ringleader.server.models import Node

log = logging.getLogger(__name__)


def ssh_nodes(database: Database) -> Callable[[], dict[str, SSHNode]]:
    """What fills the SSH backend's book of login targets: the nodes table."""

    def load() -> dict[str, SSHNode]:
        with database.reader() as s:
            rows = s.execute(
                select(Node.name, Node.ssh, Node.address).where(Node.kind == node_kinds.SSH)
            ).all()
        return {name: SSHNode(ssh or name, address or name) for name, ssh, address in rows}

    return load


class Acting:
    """The active server's work for ``app`` (see the module docstring)."""

    def __init__(self, app: FastAPI, config: ServerConfig, database: Database, book: NodeBook):
        self.app, self.config, self.database, self.book = app, config, database, book
        self._lock = threading.Lock()
        self._parts: tuple[EngineNodes, NodeMonitor, Background] | None = None
        # Until the first start: a background that is never started (routes wake it).
        app.state.background = Background(self._world(), interval_s=config.loop_interval_s)
        app.state.nodes_changed = book.refresh

    def _world(self) -> World:
        return World(
            self.database,
            self.app.state.backends,
            self.config.runs_dir,
            self.config.placement,
            server_url=self.config.url,
            pod_token_ttl_s=self.config.pod_token_ttl_s,
            accounts=accounts_for(self.config),
        )

    def start(self, epoch: int = 0) -> None:
        """Write the first rows, then start the loops (``config.background``)."""
        state, config = self.app.state, self.config
        with self._lock:
            with state.sessions() as session, session.begin():
                first_rows(session, config, state.backend)
            self.book.load_with(ssh_nodes(self.database))
            background = Background(self._world(), interval_s=config.loop_interval_s)
            engine_nodes = EngineNodes(self.database, state.backends.all, background.wake)
            engine_nodes.refresh()  # a Slurm partition's nodes are there before the first cycle
            monitor = NodeMonitor(self.database, state.node_python, state.ssh, background.wake)

            def nodes_changed() -> None:
                self.book.refresh()
                monitor.refresh()
                background.wake()

            state.background, state.nodes_changed = background, nodes_changed
            if config.background:
                background.start()
                monitor.start()
                engine_nodes.start()
                self._parts = (engine_nodes, monitor, background)

    def stop(self, why: str = "") -> None:
        """Stop the loops (their in-flight backend calls finish; writes are fenced)."""
        with self._lock:
            parts, self._parts = self._parts, None
        if parts is not None:
            for part in parts:
                try:
                    part.stop()
                except Exception:  # stopping must go on for the others
                    log.exception("stopping %s failed", type(part).__name__)


def first_rows(session: Session, config: ServerConfig, backend: Backend) -> None:
    """The admin and its credentials file on a fresh home; the declared nodes."""
    auth.bootstrap(
        session, config.data_dir / "credentials.json", f"http://{config.host}:{config.port}"
    )
    declared = config.nodes
    if declared is None:
        here = inventory.local_node(getattr(backend, "node", "localhost"))
        # A default backend with nodes of its own (Slurm's) makes this a head node.
        own = backend.capabilities.engine_nodes
        declared = [here] if config.local_node and not own else []
    inventory.sync_nodes(session, declared)

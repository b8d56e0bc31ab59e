"""The registration of SSH nodes (``nodes add``, ``nodes remove``); what a
node shows (its allocation) is ``node_views.nodes`` / ``node_views.node``.

Registration probes the host over SSH before anything is stored, and holds
no transaction (nor SQLite's write lock) while the probe waits. Only admins
register or remove nodes (they decide where everyone's code runs). Local
and simulated nodes come from the server's flags and are not removed
through the API.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.errors import Conflict, NotFound
from ringleader.hosts import ssh_host
from ringleader.server import node_kinds
from ringleader.server.models import Node, Pod, User, Workload
from ringleader.server.schemas import NodeIn, NodeOut
from ringleader.server.services import node_views
from ringleader.server.services.projects import require_admin
from ringleader.server.services.workloads import findable
from ringleader.server.snapshot import holding
from ringleader.server.ssh_nodes import NodeState, node_state

# ssh target -> the probe's facts (``cluster.probe``); the app's, or a test's stand-in.
Probe = Callable[[str], dict[str, Any]]


def node_name(body: NodeIn) -> str:
    """The name given, else the ssh target's host part (``user@gpu1`` -> ``gpu1``)."""
    return body.name or ssh_host(body.ssh)


def check_new_node(session: Session, user: User, body: NodeIn) -> None:
    """Before the probe: may ``user`` add it, and is its name free?"""
    require_admin(user, "register nodes")
    name = node_name(body)
    if session.scalar(select(Node.kind).where(Node.name == name)) is not None:
        raise Conflict(f"a node named {name!r} is already registered; `nodes remove` it first")


def add_node(session: Session, body: NodeIn, state: NodeState) -> Node:
    """Store a probed SSH node (the name's uniqueness is the index's at commit)."""
    node = Node(
        name=node_name(body),
        kind="ssh",
        pool=body.pool,
        ssh=body.ssh,
        address=body.address or ssh_host(body.ssh),
        cpu_cores=state.cpu_cores,
        memory_bytes=state.memory_bytes,
        gpus=state.gpus,
        labels=dict(body.labels),
        ready=state.ready,
        message=state.message,
        facts=state.facts,
    )
    session.add(node)
    session.flush()
    return node


def register(session: Session, user: User, body: NodeIn, probe: Probe, python: str) -> NodeOut:
    """Check, probe (outside any transaction), store and commit an SSH node; its view.

    ``python`` is the interpreter the node's ranks will run (the probe checks it).
    """
    check_new_node(session, user, body)
    session.rollback()  # no transaction (nor SQLite's write lock) held while the probe waits
    facts = probe(body.ssh)
    node = add_node(session, body, node_state(facts, python, time.time()))
    session.commit()
    return node_views.node(session, user, node.name)


def remove_node(session: Session, user: User, name: str) -> None:
    """Unregister (and commit) an SSH node that no live workload holds."""
    require_admin(user, "remove nodes")
    node = session.scalar(select(Node).where(Node.name == name)) if findable(name) else None
    if node is None:
        raise NotFound("node", name)
    if not node_kinds.reached_by_ssh(node.kind):
        raise Conflict(
            f"node {name!r} is {node.kind}: it comes from the server's flags "
            "(--simulate-nodes, --nodes-file, --no-local-node), not from `nodes add`"
        )
    held = session.scalars(
        select(Workload.name)
        .join(Pod, Pod.workload_id == Workload.id)
        .where(holding(), Pod.node == name)
        .distinct()
    ).all()
    if held:
        raise Conflict(
            f"node {name!r} runs workloads {', '.join(sorted(held))}: "
            "delete or suspend them first (or wait until they end)"
        )
    session.delete(node)
    session.commit()

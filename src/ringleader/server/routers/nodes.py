"""/api/v1/nodes: the nodes pods are placed on, with capacity and allocation;
admins register SSH hosts (probed first) and remove them."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy.orm import Session

from ringleader.server.deps import current_user, get_session
from ringleader.server.models import User
from ringleader.server.schemas import NodeIn, NodeOut
from ringleader.server.services import node_views, nodes

router = APIRouter(prefix="/api/v1/nodes", tags=["nodes"])


@router.get("", response_model=list[NodeOut], response_model_by_alias=True)
def list_all(
    user: User = Depends(current_user), s: Session = Depends(get_session)
) -> list[NodeOut]:
    """Every node, its resources and what the scheduler has allocated on it."""
    return node_views.nodes(s, user)


@router.get("/{name}", response_model=NodeOut, response_model_by_alias=True)
def get(
    name: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> NodeOut:
    return node_views.node(s, user, name)


@router.post("", status_code=201, response_model=NodeOut, response_model_by_alias=True)
def add(
    body: NodeIn,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> NodeOut:
    """Register an SSH host: probed over SSH (cores, memory, GPUs, interpreter,
    versions) with the server's own keys before anything is stored."""
    state = request.app.state
    node = nodes.register(
        s,
        user,
        body,
        probe=lambda target: state.probe_node(target, state.node_python, state.ssh),
        python=state.node_python,
    )
    state.nodes_changed()
    return node


@router.delete("/{name}", status_code=204)
def remove(
    name: str,
    request: Request,
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Response:
    """Unregister an SSH node no live workload holds."""
    nodes.remove_node(s, user, name)
    request.app.state.nodes_changed()
    return Response(status_code=204)

"""/api/v1/nodes: the nodes pods are placed on, with capacity and allocation."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from sqlalchemy.orm import Session

from ringleader.server.deps import current_user, get_session
from ringleader.server.models import User
from ringleader.server.schemas import NodeOut
from ringleader.server.services import nodes

router = APIRouter(prefix="/api/v1/nodes", tags=["nodes"])


@router.get("", response_model=list[NodeOut], response_model_by_alias=True)
def list_all(
    user: User = Depends(current_user), s: Session = Depends(get_session)
) -> list[NodeOut]:
    """Every node, its resources and what the scheduler has allocated on it."""
    return nodes.list_nodes(s, user)


@router.get("/{name}", response_model=NodeOut, response_model_by_alias=True)
def get(
    name: str, user: User = Depends(current_user), s: Session = Depends(get_session)
) -> NodeOut:
    return nodes.get_node(s, user, name)

"""/api/v1/clusters: this server as Run:ai's one cluster (``services.clusters``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request

from ringleader.server.deps import current_user
from ringleader.server.models import User
from ringleader.server.schemas import ClusterOut
from ringleader.server.services import clusters

router = APIRouter(prefix="/api/v1/clusters", tags=["clusters"])


def this_cluster_id(request: Request) -> str:
    """This server's cluster UUID, for the routes whose answers carry ``clusterId``."""
    return request.app.state.cluster.uuid


@router.get("", response_model=list[ClusterOut], response_model_by_alias=True)
def list_all(
    request: Request,
    verbosity: str | None = Query(None, max_length=16, description="Run:ai's; ignored"),
    user: User = Depends(current_user),
) -> list[ClusterOut]:
    """Run:ai's bare list (clusters are not wrapped): this server, one cluster."""
    state = request.app.state
    return [clusters.cluster_out(state.cluster, state.config.url)]


@router.get("/{cluster_uuid}", response_model=ClusterOut, response_model_by_alias=True)
def get(cluster_uuid: str, request: Request, user: User = Depends(current_user)) -> ClusterOut:
    state = request.app.state
    return clusters.get(state.cluster, state.config.url, cluster_uuid)

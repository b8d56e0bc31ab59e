"""/api/v1/asset/environment and /api/v1/asset/compute: Run:ai's workload assets.

Run:ai's paths, bodies and statuses: POST -> 202 with the asset, GET -> 200
(a list is ``{"entries": [...]}``), PUT -> 202 with the asset, DELETE -> 202
``{"code", "message"}``. Both kinds are the same routes over their own models
(``services.assets.AssetKind``).
"""

# No ``from __future__ import annotations``: FastAPI reads each route's body type
# from its annotation, which here is a variable of the factory, not a global name.
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from sqlalchemy.orm import Session

from ringleader.server.asset_schemas import (
    AssetDeleted,
    EnvironmentAsset,
    EnvironmentCreationRequest,
    EnvironmentListResponse,
    EnvironmentUpdateRequest,
)
from ringleader.server.compute_asset_schemas import (
    ComputeAsset,
    ComputeCreationRequest,
    ComputeListResponse,
    ComputeUpdateRequest,
)
from ringleader.server.deps import current_user, get_session
from ringleader.server.models import User
from ringleader.server.services import assets
from ringleader.server.services.assets import AssetKind

ScopeFilter = Literal["tenant", "cluster", "department", "project", "system"]


def _router(
    kind: AssetKind[Any, Any], create_body: Any, update_body: Any, out: Any, listing: Any
) -> APIRouter:
    router = APIRouter(prefix=f"/api/v1/asset/{kind.name}", tags=["assets"])

    @router.post("", status_code=202, response_model=out, response_model_by_alias=True)
    def create(
        body: create_body,  # type: ignore[valid-type]
        user: User = Depends(current_user),
        s: Session = Depends(get_session),
    ) -> Any:
        return assets.create(s, user, kind, body.meta, body.spec)

    @router.get("", response_model=listing, response_model_by_alias=True)
    def list_all(
        name: str | None = Query(None, max_length=255, description="Only assets of this name."),
        scope: ScopeFilter | None = Query(None, description="Only assets of this scope."),
        project_id: str | None = Query(
            None,
            alias="projectId",
            max_length=255,
            description="The project's (id or name) and everyone's assets; "
            "only the project's with scope=project.",
        ),
        user: User = Depends(current_user),
        s: Session = Depends(get_session),
    ) -> Any:
        entries = assets.list_assets(s, user, kind, name=name, scope=scope, project_key=project_id)
        return listing(entries=entries)

    @router.get("/{asset_id}", response_model=out, response_model_by_alias=True)
    def get(
        asset_id: str, user: User = Depends(current_user), s: Session = Depends(get_session)
    ) -> Any:
        return assets.get(s, user, kind, asset_id)

    @router.put("/{asset_id}", status_code=202, response_model=out, response_model_by_alias=True)
    def update(
        asset_id: str,
        body: update_body,  # type: ignore[valid-type]
        user: User = Depends(current_user),
        s: Session = Depends(get_session),
    ) -> Any:
        return assets.update(s, user, kind, asset_id, body.meta, body.spec)

    @router.delete(
        "/{asset_id}", status_code=202, response_model=AssetDeleted, response_model_by_alias=True
    )
    def delete(
        asset_id: str, user: User = Depends(current_user), s: Session = Depends(get_session)
    ) -> AssetDeleted:
        name = assets.delete(s, user, kind, asset_id)
        return AssetDeleted(message=f"{kind.title} {name!r} deleted")

    return router


environment = _router(
    assets.ENVIRONMENT,
    EnvironmentCreationRequest,
    EnvironmentUpdateRequest,
    EnvironmentAsset,
    EnvironmentListResponse,
)
compute = _router(
    assets.COMPUTE, ComputeCreationRequest, ComputeUpdateRequest, ComputeAsset, ComputeListResponse
)
router = APIRouter()  # both kinds, as the app includes them
router.include_router(environment)
router.include_router(compute)

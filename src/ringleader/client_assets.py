"""The client's calls for workload assets (environments and compute resources).

A mixin of ``Client``, kept apart so the SDK's module stays short: every call
goes through the client's ``request`` and reads answers as stored
(``asset_schemas.STORED``: the server's own values are trusted, not re-checked).
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

import ringleader.server.asset_schemas as assets
import ringleader.server.compute_asset_schemas as resources
from ringleader.errors import NotFound

M = TypeVar("M", bound=BaseModel)


def request_json(model: BaseModel) -> Any:
    """A request body: camelCase, and only the fields that were given (the server fills
    in the defaults, as it does for any other client's JSON)."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


class AssetCalls:
    """Environment and compute-resource assets: create, list, get, find, update, delete."""

    project: str | None

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def _asset_list(self, path: str, model: type[M], **params: Any) -> list[M]:
        query = {key: value for key, value in params.items() if value is not None}
        entries = self.request("GET", path, params=query).json()["entries"]
        return [model.model_validate(entry, context=assets.STORED) for entry in entries]

    def _asset(self, method: str, path: str, model: type[M], request: BaseModel | None = None) -> M:
        """One asset sent and/or read back (create, get, update), as stored."""
        body = {} if request is None else {"json": request_json(request)}
        response = self.request(method, path, **body)
        return model.model_validate(response.json(), context=assets.STORED)

    def _asset_named(
        self, path: str, model: type[M], title: str, name: str, project: str | None
    ) -> M:
        """The asset ``name`` that ``project`` (else the current one) sees: its own
        before everyone's, as a workload submitted there would get it."""
        project = project or self.project or "default"
        found = self._asset_list(path, model, name=name, projectId=project)
        own = [a for a in found if getattr(a, "meta").project_id is not None]  # noqa: B009
        if not (own or found):
            raise NotFound(title, name)
        return (own or found)[0]

    def create_environment(
        self, request: assets.EnvironmentCreationRequest
    ) -> assets.EnvironmentAsset:
        return self._asset("POST", "/api/v1/asset/environment", assets.EnvironmentAsset, request)

    def environments(
        self, project: str | None = None, name: str | None = None, scope: str | None = None
    ) -> list[assets.EnvironmentAsset]:
        """Environment assets: with ``project``, its own and everyone's; else all visible."""
        return self._asset_list(
            "/api/v1/asset/environment",
            assets.EnvironmentAsset,
            projectId=project,
            name=name,
            scope=scope,
        )

    def environment(self, asset_id: str) -> assets.EnvironmentAsset:
        return self._asset("GET", f"/api/v1/asset/environment/{asset_id}", assets.EnvironmentAsset)

    def find_environment(self, name: str, project: str | None = None) -> assets.EnvironmentAsset:
        return self._asset_named(
            "/api/v1/asset/environment", assets.EnvironmentAsset, "environment", name, project
        )

    def update_environment(
        self, asset_id: str, request: assets.EnvironmentUpdateRequest
    ) -> assets.EnvironmentAsset:
        path = f"/api/v1/asset/environment/{asset_id}"
        return self._asset("PUT", path, assets.EnvironmentAsset, request)

    def delete_environment(self, asset_id: str) -> None:
        self.request("DELETE", f"/api/v1/asset/environment/{asset_id}")

    def create_compute_resource(
        self, request: resources.ComputeCreationRequest
    ) -> resources.ComputeAsset:
        return self._asset("POST", "/api/v1/asset/compute", resources.ComputeAsset, request)

    def compute_resources(
        self, project: str | None = None, name: str | None = None, scope: str | None = None
    ) -> list[resources.ComputeAsset]:
        """Compute-resource assets: with ``project``, its own and everyone's; else all."""
        return self._asset_list(
            "/api/v1/asset/compute",
            resources.ComputeAsset,
            projectId=project,
            name=name,
            scope=scope,
        )

    def compute_resource(self, asset_id: str) -> resources.ComputeAsset:
        return self._asset("GET", f"/api/v1/asset/compute/{asset_id}", resources.ComputeAsset)

    def find_compute_resource(
        self, name: str, project: str | None = None
    ) -> resources.ComputeAsset:
        return self._asset_named(
            "/api/v1/asset/compute", resources.ComputeAsset, "compute resource", name, project
        )

    def update_compute_resource(
        self, asset_id: str, request: resources.ComputeUpdateRequest
    ) -> resources.ComputeAsset:
        path = f"/api/v1/asset/compute/{asset_id}"
        return self._asset("PUT", path, resources.ComputeAsset, request)

    def delete_compute_resource(self, asset_id: str) -> None:
        self.request("DELETE", f"/api/v1/asset/compute/{asset_id}")

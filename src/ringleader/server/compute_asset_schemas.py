"""Wire schemas of Run:ai's compute resources (a workload asset; what assets share,
and the module's invariants, are in ``asset_schemas``).

A *compute resource* holds what one pod asks for (GPU devices, portion or memory,
CPU cores, CPU memory): a workload's ``compute`` block, named and reusable.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from ringleader.server.asset_schemas import (
    MAX_LIST_ITEMS,
    AssetCreationMeta,
    AssetMetaOut,
    AssetUpdateMeta,
    ShortText,
    _AssetWire,
)
from ringleader.server.schemas import Wire
from ringleader.spec import Compute, bounded
from ringleader.spec_limits import parse_quantity

GPU_FIELDS = (
    "gpu_devices_request",
    "gpu_request_type",
    "gpu_portion_request",
    "gpu_portion_limit",
    "gpu_memory_request",
    "gpu_memory_limit",
)


def _quantity(text: str | None) -> str | None:
    if text is not None:
        parse_quantity(text)
    return text


class ExtendedResource(_AssetWire):
    resource: ShortText | None = None
    quantity: Annotated[str, bounded(64), AfterValidator(_quantity)] | None = None
    exclude: bool | None = None


class ComputeAssetSpec(Compute):
    """Run:ai's ``ComputeAssetSpec``: a workload's compute block, plus two fields
    accepted and stored but not applied (``extendedResources``, ``largeShmRequest``)."""

    extended_resources: list[ExtendedResource] | None = Field(
        default=None, max_length=MAX_LIST_ITEMS
    )
    large_shm_request: bool | None = None

    @model_validator(mode="after")
    def _request_type_has_its_amount(self) -> ComputeAssetSpec:
        kind = self.gpu_request_type
        if kind == "portion" and self.gpu_portion_request is None:
            raise ValueError("gpuPortionRequest is required when gpuRequestType is portion")
        if kind == "memory" and self.gpu_memory_request is None:
            raise ValueError("gpuMemoryRequest is required when gpuRequestType is memory")
        if kind != "portion" and self.gpu_portion_request is not None:
            raise ValueError("gpuPortionRequest needs gpuRequestType portion")
        if kind != "memory" and self.gpu_memory_request is not None:
            raise ValueError("gpuMemoryRequest needs gpuRequestType memory")
        return self

    def fill(self, compute: dict[str, Any]) -> dict[str, Any]:
        """``compute`` (a workload's compute block, Python names) with this resource's
        values where the user gave none. A GPU request is one unit: any GPU value the
        user gave replaces all of this resource's GPU values; CPU and memory fields
        are filled one by one."""
        given = {key: value for key, value in compute.items() if value is not None}
        applied = set(Compute.model_fields) - Compute.runai_ignored  # what a workload uses
        mine = self.model_dump(include=applied, exclude_none=True)
        if any(key in given for key in GPU_FIELDS):
            mine = {key: value for key, value in mine.items() if key not in GPU_FIELDS}
        return {**mine, **given}


IGNORED_COMPUTE_FIELDS = ("extendedResources", "largeShmRequest")


class ComputeCreationRequest(_AssetWire):
    meta: AssetCreationMeta
    spec: ComputeAssetSpec | None = None  # Run:ai's may be null: asks for nothing


class ComputeUpdateRequest(_AssetWire):
    meta: AssetUpdateMeta
    spec: ComputeAssetSpec | None = None


class ComputeAsset(Wire):
    meta: AssetMetaOut
    spec: ComputeAssetSpec


class ComputeListResponse(Wire):
    entries: list[ComputeAsset]

"""The asset table: Run:ai's workload assets (environments, compute resources) as rows.

Why apart from ``models``: assets are a catalog of their own, read and written
only by ``services/assets`` (their wire shapes are in ``asset_schemas``); the
workload, pod and event tables never refer to them, since a workload carries an
asset's values in its spec (the CLI fills them in: ``cli/submit_assets``), never
a reference.  ``models`` imports this
module, so the table is in ``Base.metadata`` (and Alembic's comparison) whenever
the models are, and re-exports ``Asset``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from ringleader.server.model_base import (
    NAME_LENGTH,
    PHASE_LENGTH,
    Base,
    created_at_column,
    updated_at_column,
)

if TYPE_CHECKING:
    from ringleader.server.models import Project


def _asset_id() -> str:
    """A UUID, as Run:ai's asset ids are (``/api/v1/asset/.../{assetId}``)."""
    return str(uuid.uuid4())


class Asset(Base):
    """A reusable building block of workloads, Run:ai's *workload asset*: an
    ``environment`` (image, command, args, variables, working directory) or a
    ``compute`` resource (GPU devices/portion/memory, CPU cores, CPU memory).
    ``spec`` is Run:ai's asset spec as accepted (camelCase JSON); ``meta``
    holds the other accepted meta fields (``workloadSupportedTypes`` ...).

    ``scope`` is ``project`` (``project_id`` set; deleting the project deletes
    it) or ``tenant``/``cluster`` (``project_id`` NULL: every user sees it).
    A name is unique per kind within its project, and among the assets of the
    whole server (tenant and cluster are one scope here: one server, one cluster).
    """

    __tablename__ = "assets"
    __table_args__ = (
        Index(
            "uq_assets_kind_project_id_name",
            "kind",
            "project_id",
            "name",
            unique=True,
            sqlite_where=text("project_id IS NOT NULL"),
            postgresql_where=text("project_id IS NOT NULL"),
        ),
        Index(
            "uq_assets_kind_name_everywhere",
            "kind",
            "name",
            unique=True,
            sqlite_where=text("project_id IS NULL"),
            postgresql_where=text("project_id IS NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=_asset_id)
    kind: Mapped[str] = mapped_column(String(PHASE_LENGTH))
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    description: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    scope: Mapped[str] = mapped_column(String(PHASE_LENGTH))
    project_id: Mapped[str | None] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    cluster_id: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_by: Mapped[str] = mapped_column(String(NAME_LENGTH))
    updated_by: Mapped[str] = mapped_column(String(NAME_LENGTH))
    update_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()

    project: Mapped[Project | None] = relationship()

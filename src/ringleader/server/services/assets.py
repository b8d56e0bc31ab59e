"""Workload assets (Run:ai's environments and compute resources): create, list,
get, update, delete, with the same roles as workloads.

Nomenclature: an ``AssetKind`` is what differs between the two kinds of asset
(its name, its spec model, its response models); every function here takes
one, so both kinds share one code path and neither is a string to switch on.
An asset's *scope* is one project (``project_id`` set) or everyone
(``tenant`` / ``cluster``: ``project_id`` NULL).

Invariants:
- who may do what follows ``roles``: any member of a project (viewers too)
  reads its assets; a researcher or project admin creates, changes and deletes
  them; every user reads the assets of the tenant and the cluster, and only a
  global admin writes them;
- an asset of a project the caller is not a member of is "not found" (404),
  as its workloads are; a member without the role gets 403 naming the role;
- a name is unique per kind in its scope (409 naming it; the database's
  unique indexes settle a race, ``app._integrity_error``); at most
  ``MAX_ASSETS_PER_SCOPE`` of a kind per scope;
- each write commits its own transaction and answers with the asset's view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.orm import Session

from ringleader.errors import Conflict, Forbidden, NotFound
from ringleader.server.asset_schemas import (
    MAX_ASSETS_PER_SCOPE,
    AssetCreationMeta,
    AssetMetaOut,
    AssetUpdateMeta,
    EnvironmentAsset,
    EnvironmentAssetSpec,
    EnvironmentListResponse,
)
from ringleader.server.compute_asset_schemas import (
    ComputeAsset,
    ComputeAssetSpec,
    ComputeListResponse,
)
from ringleader.server.db import utcnow
from ringleader.server.models import Asset, Project, User
from ringleader.server.services.roles import ALLOWED, require_global_admin, require_role, role_in
from ringleader.server.services.workloads import findable, resolve_project, visible_projects
from ringleader.spec import STORED

S = TypeVar("S", bound=BaseModel)  # the kind's spec model
O = TypeVar("O", bound=BaseModel)  # noqa: E741 - the kind's answer model


@dataclass(frozen=True)
class AssetKind(Generic[S, O]):
    """One kind of asset: how it is named, and the models of its spec and answers."""

    name: str  # "environment" | "compute": the column value and Run:ai's ``kind``
    title: str  # how messages call one ("environment", "compute resource")
    article: str  # "an" environment, "a" compute resource
    spec: type[S]
    out: type[O]
    listing: type[BaseModel]  # {"entries": [...]}


ENVIRONMENT = AssetKind(
    "environment",
    "environment",
    "an",
    EnvironmentAssetSpec,
    EnvironmentAsset,
    EnvironmentListResponse,
)
COMPUTE = AssetKind(
    "compute", "compute resource", "a", ComputeAssetSpec, ComputeAsset, ComputeListResponse
)


def _stored_spec(spec: BaseModel | None) -> dict[str, Any]:
    """What the row keeps: the spec as given, camelCase, without empty fields."""
    return {} if spec is None else spec.model_dump(mode="json", by_alias=True, exclude_none=True)


def view(kind: AssetKind[S, O], asset: Asset, project_name: str | None) -> O:
    """The asset as the API shows it (Run:ai's ``EnvironmentAsset`` / ``ComputeAsset``)."""
    meta = AssetMetaOut(
        id=asset.id,
        kind=kind.name,  # type: ignore[arg-type]
        name=asset.name,
        description=asset.description,
        scope=asset.scope,
        project_id=asset.project_id,
        project_name=project_name,
        cluster_id=asset.cluster_id,
        created_by=asset.created_by,
        created_at=asset.created_at,
        updated_by=asset.updated_by,
        updated_at=asset.updated_at,
        update_count=asset.update_count,
        **{k: v for k, v in (asset.meta or {}).items() if k in _META_KEYS},
    )
    spec = kind.spec.model_validate(asset.spec or {}, context=STORED)
    return kind.out.model_validate({"meta": meta, "spec": spec})


_META_KEYS = {"autoDelete", "workloadSupportedTypes", "private"}


def _scope_text(project: Project | None) -> str:
    return f"in project {project.name!r}" if project else "for every project"


def _require_write(session: Session, user: User, project: Project | None, what: str) -> None:
    """Researchers and project admins write their project's assets; only global
    admins write the ones every project sees."""
    if project is None:
        require_global_admin(user, f"{what} assets that every project sees")
        return
    if user.is_admin:
        return
    role = role_in(session, user, project.id)
    if role is None:
        raise NotFound("project", project.name)
    if role not in ALLOWED["run"]:
        needed = " or ".join(sorted(ALLOWED["run"]))
        raise Forbidden(
            f"a {role} of project {project.name!r} cannot {what} its assets; "
            f"that needs the role {needed}"
        )


def _same_scope(kind: AssetKind[Any, Any], project: Project | None) -> list[ColumnElement[bool]]:
    where = [Asset.kind == kind.name]
    where.append(Asset.project_id == project.id if project else Asset.project_id.is_(None))
    return where


def _check_name_free(
    session: Session, kind: AssetKind[Any, Any], project: Project | None, name: str, me: str = ""
) -> None:
    clash = session.scalar(
        select(Asset.id).where(*_same_scope(kind, project), Asset.name == name, Asset.id != me)
    )
    if clash is not None:
        raise Conflict(
            f"{kind.article} {kind.title} named {name!r} already exists {_scope_text(project)} "
            f"(id {clash}); choose another name or update that one"
        )


def create(
    session: Session, user: User, kind: AssetKind[S, O], meta: AssetCreationMeta, spec: S | None
) -> O:
    """A new asset in ``meta.scope``; 409 when its name is taken there."""
    project = None
    if meta.scope == "project":
        project = resolve_project(session, user, str(meta.project_id))
    _require_write(session, user, project, "create")
    _check_name_free(session, kind, project, meta.name)
    count = session.scalar(
        select(func.count()).select_from(Asset).where(*_same_scope(kind, project))
    )
    if (count or 0) >= MAX_ASSETS_PER_SCOPE:
        raise Conflict(
            f"there are already {MAX_ASSETS_PER_SCOPE} {kind.title} assets "
            f"{_scope_text(project)}, the most one scope holds; delete some first"
        )
    asset = Asset(
        kind=kind.name,
        name=meta.name,
        description=meta.description,
        scope=meta.scope,
        project_id=project.id if project else None,
        cluster_id=meta.cluster_id,
        spec=_stored_spec(spec),
        meta=meta.extra_meta(),
        created_by=user.name,
        updated_by=user.name,
    )
    session.add(asset)
    session.commit()
    return view(kind, asset, project.name if project else None)


def _visible(session: Session, user: User) -> ColumnElement[bool]:
    """Assets every project sees, and those of the caller's projects (admins: all)."""
    if user.is_admin:
        return Asset.id.is_not(None)
    return or_(Asset.project_id.is_(None), Asset.project_id.in_(visible_projects(session, user)))


def list_assets(
    session: Session,
    user: User,
    kind: AssetKind[S, O],
    *,
    name: str | None = None,
    scope: str | None = None,
    project_key: str | None = None,
) -> list[O]:
    """Run:ai's list: with ``project_key``, that project's assets and everyone's
    (only the project's with ``scope=project``); ``scope`` and ``name`` filter."""
    query = (
        select(Asset, Project.name)
        .outerjoin(Project, Project.id == Asset.project_id)
        .where(Asset.kind == kind.name, _visible(session, user))
    )
    if project_key is not None:
        project = resolve_project(session, user, project_key)
        require_role(session, user, project, "view")
        if scope == "project":
            query = query.where(Asset.project_id == project.id)
        else:
            query = query.where(or_(Asset.project_id == project.id, Asset.project_id.is_(None)))
    if scope == "project":
        query = query.where(Asset.project_id.is_not(None))
    elif scope is not None:
        query = query.where(Asset.scope == scope)  # department, system: none here
    if name is not None:
        if not findable(name):
            return []
        query = query.where(Asset.name == name)
    rows = session.execute(query.order_by(Asset.project_id.is_not(None), Project.name, Asset.name))
    return [view(kind, asset, project_name) for asset, project_name in rows]


def _find(session: Session, user: User, kind: AssetKind[Any, Any], asset_id: str) -> Asset:
    asset = session.get(Asset, asset_id) if findable(asset_id) else None
    if asset is None or asset.kind != kind.name:
        raise NotFound(kind.title, asset_id)
    if asset.project_id is not None:
        member = user.is_admin or role_in(session, user, asset.project_id) is not None
        if not member:
            raise NotFound(kind.title, asset_id)
    return asset


def get(session: Session, user: User, kind: AssetKind[S, O], asset_id: str) -> O:
    asset = _find(session, user, kind, asset_id)
    return view(kind, asset, asset.project.name if asset.project else None)


def update(
    session: Session,
    user: User,
    kind: AssetKind[S, O],
    asset_id: str,
    meta: AssetUpdateMeta,
    spec: S | None,
) -> O:
    """Rename, describe and replace the spec (Run:ai's PUT); the scope stays."""
    asset = _find(session, user, kind, asset_id)
    _require_write(session, user, asset.project, "change")
    _check_name_free(session, kind, asset.project, meta.name, me=asset.id)
    asset.name = meta.name
    asset.description = meta.description
    asset.spec = _stored_spec(spec)
    asset.updated_by = user.name
    asset.updated_at = utcnow()
    asset.update_count += 1
    session.commit()
    return view(kind, asset, asset.project.name if asset.project else None)


def delete(session: Session, user: User, kind: AssetKind[Any, Any], asset_id: str) -> str:
    """Remove the asset; workloads submitted with it keep their copies of its values."""
    asset = _find(session, user, kind, asset_id)
    _require_write(session, user, asset.project, "delete")
    name = asset.name
    session.delete(asset)
    session.commit()
    return name

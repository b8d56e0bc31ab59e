"""Rows: the control plane's state as SQLAlchemy ORM classes (the middle model layer).

Nomenclature:
- *project*: a tenant with per-node-pool quotas (``resources``, Run:ai's list
  of node-pool dicts, stored as sent); *member*: a user allowed in a project.
- *access key*: a client id + hashed secret a user exchanges for a *token*
  (a hashed bearer token with an expiry).
- *workload*: one submitted job. ``spec`` is the user's intent
  (``ringleader.spec.WorkloadSpec`` as JSON, with ``spec_version``);
  ``desired_phase`` is what the user asked for (Running | Stopped | Deleted);
  ``phase`` is what we observe (Run:ai names, see ``phases``);
  ``handle`` is the backend's id for what it started; ``attempt`` counts restarts.
- *pod*: one member of a workload's gang as the backend reports it
  (master | worker | launcher), with the global ranks it runs.
- *event*: an append-only history row: phase changes and notable happenings.

Invariants:
- Domain ids are short random strings (``new_id``), generated in Python, so a
  row has its id before it is flushed; events use an integer id, which orders them.
- Phase columns are changed only through ``phases.transition`` /
  ``phases.transition_pod`` (one door for status), which write the events.
- A live workload's name is unique in its project; a soft-deleted one
  (``deleted_at`` set) frees the name (a partial unique index, on SQLite and
  PostgreSQL alike).
- Deleting a workload deletes its pods and events (ON DELETE CASCADE); a
  project with workloads cannot be deleted (RESTRICT).
- Every datetime is aware UTC (``db.UTCDateTime``).
- The schema is created by Alembic migrations only; a test checks that the
  migrated database matches this module exactly.

The declarative ``Base`` and the column conventions are in ``model_base``, the
asset table in ``asset_models``; both are re-exported here, and importing this
module registers every table in ``Base.metadata``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from ringleader.server.asset_models import Asset as Asset
from ringleader.server.db import UTCDateTime, utcnow
from ringleader.server.model_base import ID_LENGTH as ID_LENGTH
from ringleader.server.model_base import NAME_LENGTH as NAME_LENGTH
from ringleader.server.model_base import NAMING_CONVENTION as NAMING_CONVENTION
from ringleader.server.model_base import PHASE_LENGTH as PHASE_LENGTH
from ringleader.server.model_base import Base as Base
from ringleader.server.model_base import created_at_column, id_column, updated_at_column
from ringleader.server.model_base import new_id as new_id


class Project(Base):
    __tablename__ = "projects"

    id: Mapped[str] = id_column()
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    resources: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()

    members: Mapped[list[User]] = relationship(
        secondary="project_members", back_populates="projects", passive_deletes=True
    )


class User(Base):
    __tablename__ = "users"

    id: Mapped[str] = id_column()
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    # The OS account its workloads run as when the server runs as root (None: mapped).
    os_user: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    created_at: Mapped[datetime] = created_at_column()

    projects: Mapped[list[Project]] = relationship(
        secondary="project_members", back_populates="members", passive_deletes=True
    )


class ProjectMember(Base):
    __tablename__ = "project_members"

    project_id: Mapped[str] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[str] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    role: Mapped[str] = mapped_column(
        String(PHASE_LENGTH), default="researcher", server_default="researcher"
    )


class AccessKey(Base):
    __tablename__ = "access_keys"

    id: Mapped[str] = id_column()
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    client_id: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    secret_hash: Mapped[str] = mapped_column(String(NAME_LENGTH))
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), default="", server_default="")
    created_at: Mapped[datetime] = created_at_column()
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Token(Base):
    __tablename__ = "tokens"

    id: Mapped[str] = id_column()
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True, index=True)
    # The key it was issued for (revoking the key ends its tokens) ...
    access_key_id: Mapped[str | None] = mapped_column(
        ForeignKey("access_keys.id", ondelete="CASCADE"), index=True
    )
    # ... or the workload whose pods hold it (it ends with the workload).
    workload_id: Mapped[str | None] = mapped_column(
        ForeignKey("workloads.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = created_at_column()
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Workload(Base):
    __tablename__ = "workloads"
    __table_args__ = (
        Index(
            "uq_workloads_project_id_name_live",
            "project_id",
            "name",
            unique=True,
            sqlite_where=text("deleted_at IS NULL"),
            postgresql_where=text("deleted_at IS NULL"),
        ),
        # The list's sorts (migration 0002).
        Index("ix_workloads_name_id", "name", "id"),
        # The list's filters by phase and by project and phase, newest first, and their
        # counts (migration 0010): partial on the live rows, as the list asks for them,
        # so a page's total is counted in the index alone (docs/control-plane.md).
        Index(
            "ix_workloads_live_phase_created_at",
            "phase",
            "created_at",
            "id",
            sqlite_where=text("deleted_at IS NULL"),
            postgresql_where=text("deleted_at IS NULL"),
        ),
        Index(
            "ix_workloads_live_project_id_phase_created_at",
            "project_id",
            "phase",
            "created_at",
            "id",
            sqlite_where=text("deleted_at IS NULL"),
            postgresql_where=text("deleted_at IS NULL"),
        ),
        Index(
            "ix_workloads_live_project_id_created_at",
            "project_id",
            "created_at",
            "id",
            sqlite_where=text("deleted_at IS NULL"),
            postgresql_where=text("deleted_at IS NULL"),
        ),
        Index(
            "ix_workloads_live_phase_name",
            "phase",
            "name",
            "id",
            sqlite_where=text("deleted_at IS NULL"),
            postgresql_where=text("deleted_at IS NULL"),
        ),
        # The sorts by the table's Pods, GPU and CPU columns (migration 0008).
        Index("ix_workloads_running_pods_id", "running_pods", "id"),
        Index("ix_workloads_requested_pods_id", "requested_pods", "id"),
        Index("ix_workloads_requested_gpus_id", "requested_gpus", "id"),
        Index("ix_workloads_requested_cpu_cores_id", "requested_cpu_cores", "id"),
        # A retried submission is the first one (migration 0009, services/idempotency.py).
        Index(
            "uq_workloads_created_by_idempotency_key", "created_by", "idempotency_key", unique=True
        ),
    )

    id: Mapped[str] = id_column()
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    project_id: Mapped[str] = mapped_column(ForeignKey("projects.id", ondelete="RESTRICT"))
    created_by: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), index=True
    )
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    spec_version: Mapped[int] = mapped_column(Integer, default=1)
    framework: Mapped[str] = mapped_column(String(PHASE_LENGTH))
    desired_phase: Mapped[str] = mapped_column(String(PHASE_LENGTH), default="Running")
    phase: Mapped[str] = mapped_column(String(PHASE_LENGTH), default="Creating", index=True)
    phase_reason: Mapped[str] = mapped_column(String(NAME_LENGTH), default="")
    phase_message: Mapped[str] = mapped_column(Text, default="")
    backend: Mapped[str] = mapped_column(String(PHASE_LENGTH), default="local")
    handle: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    # What the spec asks for in all (``workloads.requested``): written once at submit,
    # since a spec never changes; stored so that the list can sort by them (0008).
    # running_pods: how many of its pods are Running, kept by ``phases`` (the one
    # writer of pod phases) for the same sort; the API still counts the pods.
    running_pods: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    requested_pods: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    requested_gpus: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    requested_cpu_cores: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    # The submission's Idempotency-Key header and its body's digest (None without one).
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    request_digest: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = updated_at_column()
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    project: Mapped[Project] = relationship()
    pods: Mapped[list[Pod]] = relationship(
        back_populates="workload",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="Pod.name",
    )
    events: Mapped[list[Event]] = relationship(
        back_populates="workload",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="Event.id",
    )


class Pod(Base):
    __tablename__ = "pods"
    # phase: the loops look up the running pods of ended workloads (migration 0004).
    __table_args__ = (UniqueConstraint("workload_id", "name"), Index("ix_pods_phase", "phase"))

    id: Mapped[str] = id_column()
    workload_id: Mapped[str] = mapped_column(ForeignKey("workloads.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    role: Mapped[str] = mapped_column(String(PHASE_LENGTH))
    index: Mapped[int] = mapped_column(Integer)
    node: Mapped[str] = mapped_column(String(NAME_LENGTH), default="")
    phase: Mapped[str] = mapped_column(String(PHASE_LENGTH), default="Pending")
    exit_code: Mapped[int | None] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    ranks: Mapped[list[int]] = mapped_column(JSON, default=list)
    # The scheduler's binding: [{"index": 0, "share": 0.5, "memoryBytes": null}, ...]
    gpus: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    # What the OS measured (cgroup): peak memory and CPU time; None where unmeasured.
    peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    cpu_seconds: Mapped[float | None] = mapped_column(Float)
    # How its processes are tracked: "cgroup-v1", "cgroup-v2", or "environment" (fallback).
    isolation: Mapped[str] = mapped_column(String(PHASE_LENGTH), default="", server_default="")
    created_at: Mapped[datetime] = created_at_column()
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = updated_at_column()

    workload: Mapped[Workload] = relationship(back_populates="pods")


class Event(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    workload_id: Mapped[str] = mapped_column(
        ForeignKey("workloads.id", ondelete="CASCADE"), index=True
    )
    pod_name: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    time: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    type: Mapped[str] = mapped_column(String(64))
    from_phase: Mapped[str | None] = mapped_column(String(PHASE_LENGTH))
    to_phase: Mapped[str | None] = mapped_column(String(PHASE_LENGTH))
    reason: Mapped[str] = mapped_column(String(NAME_LENGTH), default="")
    message: Mapped[str] = mapped_column(Text, default="")

    workload: Mapped[Workload] = relationship(back_populates="events")


class Node(Base):
    """A machine pods are placed on: this one (``local``), a declared
    ``simulated`` one (pods run here; for trying the scheduler without GPUs),
    or a registered SSH host.  Capacity is what the scheduler may allocate;
    ``gpus`` is ``[{"index": 0, "memoryBytes": 85899345920, "model": "..."}]``.
    An SSH node has ``ssh`` (the login target) and ``facts`` (what its last
    probe found: OS, interpreter, torch and ringleader versions, when).
    """

    __tablename__ = "nodes"

    id: Mapped[str] = id_column()
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    kind: Mapped[str] = mapped_column(String(PHASE_LENGTH), default="local")
    pool: Mapped[str] = mapped_column(String(NAME_LENGTH), default="default")
    address: Mapped[str] = mapped_column(String(NAME_LENGTH), default="")
    cpu_cores: Mapped[float] = mapped_column(Float, default=0.0)
    memory_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    gpus: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    labels: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    ready: Mapped[bool] = mapped_column(Boolean, default=True)
    message: Mapped[str] = mapped_column(Text, default="")
    ssh: Mapped[str] = mapped_column(String(NAME_LENGTH), default="", server_default="")
    facts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, server_default="{}")
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()


class ServerLease(Base):
    """The lease that says which server is active (``server/ha``): one row, read and
    written by the election in SQL of its own; here so migrations match the models."""

    __tablename__ = "server_lease"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    epoch: Mapped[int] = mapped_column(BigInteger)  # bumped by every take-over
    holder: Mapped[str] = mapped_column(String(64))  # the active server's id
    url: Mapped[str] = mapped_column(String(500))  # where the holder answers
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())  # the database's clock

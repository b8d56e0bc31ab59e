"""This server as Run:ai's one cluster: its identity, and what GET /api/v1/clusters shows.

Why: Run:ai's API names a cluster in every workload (``clusterId``; seed 002's
body carries ``<CLUSTER-UUID>``, and ``runapy``'s create request requires it),
so a script first lists the clusters and takes the UUID.  Here the server and
its nodes are one cluster.

Invariants:
- the UUID is stable: made on the first start and kept in
  ``<data dir>/cluster.json`` (0600) with the cluster's name and creation
  time; every later start reads it back, so a restart keeps the UUID scripts
  hold;
- a workload may name this cluster or none; another is a 422 that says which
  UUID this server is (``check_cluster``).
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ringleader import __version__
from ringleader.errors import InvalidSpec, NotFound
from ringleader.server.db import utcnow
from ringleader.server.schemas import ClusterOut, ClusterStatus

CLUSTER_FILE = "cluster.json"
TENANT_ID = 1  # Run:ai's tenant: one here


@dataclass(frozen=True)
class Cluster:
    uuid: str
    name: str
    created_at: datetime
    started_at: datetime  # this run of the server


def load_or_create(data_dir: Path) -> Cluster:
    """The cluster recorded in ``data_dir``, made (and recorded) on the first start."""
    path = data_dir / CLUSTER_FILE
    record = {
        "uuid": str(uuid.uuid4()),
        "name": socket.gethostname() or "ringleader",
        "createdAt": utcnow().isoformat(),
    }
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        record = _read(path)
    else:
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(record, indent=2) + "\n")
    return Cluster(
        uuid=record["uuid"],
        name=record["name"],
        created_at=datetime.fromisoformat(record["createdAt"]),
        started_at=utcnow(),
    )


def _read(path: Path) -> dict[str, str]:
    try:
        record = json.loads(path.read_text())
        uuid.UUID(record["uuid"])
        datetime.fromisoformat(record["createdAt"])
        str(record["name"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(
            f"{path} is not this server's cluster record ({exc}); restore it, or remove it "
            "to give the cluster a new UUID (scripts holding the old one must be updated)"
        ) from None
    return record


def cluster_out(cluster: Cluster, domain: str) -> ClusterOut:
    return ClusterOut(
        uuid=cluster.uuid,
        tenant_id=TENANT_ID,
        name=cluster.name,
        created_at=cluster.created_at,
        domain=domain,
        version=__version__,
        status=ClusterStatus(
            state="Connected",
            conditions=[
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "ServerRunning",
                    "message": "the ringleader server is this cluster's control plane",
                    "lastTransitionTime": cluster.started_at.isoformat(),
                }
            ],
        ),
        updated_at=cluster.started_at,
        last_liveness=utcnow(),
    )


def get(cluster: Cluster, domain: str, key: str) -> ClusterOut:
    if key != cluster.uuid:
        raise NotFound("cluster", key)
    return cluster_out(cluster, domain)


def check_cluster(cluster_id: str | None, cluster: Cluster | None) -> None:
    """A workload's ``clusterId``: none, or this server's (else a 422 naming it)."""
    if cluster_id is None or cluster is None or cluster_id == cluster.uuid:
        return
    raise InvalidSpec(
        f"no cluster {cluster_id[:64]!r} here: this server is one cluster, {cluster.uuid} "
        "(GET /api/v1/clusters); give that UUID or leave clusterId out",
        "clusterId",
    )

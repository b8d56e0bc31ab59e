"""The kinds of node the server knows, declared once: what each is and who owns it.

Why one table: "ssh" and "local" were compared in eight files and four sets of
kinds (the inventory's own, the engine's, the backend for each kind, the UI's
labels) had to be kept in step by hand; a new backend (containers, another
engine) would have had to find them all.  Everything about a kind is here, and
the rest asks (``KINDS[row.kind].reached_by_ssh``, ``ENGINE``...).

- ``declared``: the server's own declaration makes and removes these rows (this
  machine, ``--node`` stand-ins: ``inventory.sync_nodes``);
- ``backend``: the backend (``backends.REGISTRY`` name) that runs its pods unless
  the node's pool names another;
- ``engine``: its engine (Slurm) lists the nodes, places pods on them and says
  whether they are ready; ringleader's heartbeats and node-lost handling leave them
  alone;
- ``reached_by_ssh``: registered hosts, probed and heartbeaten over OpenSSH.
"""

from __future__ import annotations

from dataclasses import dataclass

LOCAL = "local"
SIMULATED = "simulated"
SSH = "ssh"
SLURM = "slurm"


@dataclass(frozen=True)
class NodeKind:
    name: str
    label: str  # the web UI's words for it
    backend: str
    declared: bool = False
    engine: bool = False
    reached_by_ssh: bool = False


KINDS: dict[str, NodeKind] = {
    k.name: k
    for k in (
        NodeKind(LOCAL, "local (this server's machine)", "local", declared=True),
        NodeKind(
            SIMULATED, "simulated (stand-in GPUs; pods run on the server)", "local", declared=True
        ),
        NodeKind(SSH, "ssh (a registered host)", "ssh", reached_by_ssh=True),
        NodeKind(SLURM, "slurm (a Slurm partition's node)", "slurm", engine=True),
    )
}
DECLARED = frozenset(k.name for k in KINDS.values() if k.declared)
ENGINE = frozenset(k.name for k in KINDS.values() if k.engine)
LABELS = {name: kind.label for name, kind in KINDS.items()}


def backend_for(kind: str) -> str | None:
    """The backend that runs a pod bound to a node of ``kind`` when its pool names none
    (None: the default backend, this machine's)."""
    known = KINDS.get(kind)
    return known.backend if known is not None and not known.declared else None


def reached_by_ssh(kind: str) -> bool:
    known = KINDS.get(kind)
    return known is not None and known.reached_by_ssh

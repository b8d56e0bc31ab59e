"""A partition's nodes as Slurm tells them: ``scontrol show node -o`` -> ``SlurmNode``.

Nomenclature: a *node* is one ``NodeName`` of slurm.conf with what its slurmd
registered: CPUs (``CPUTot``), memory (``RealMemory``, MiB), GPUs (the ``gpu``
entries of ``Gres``: ``gpu:4``, ``gpu:a100:4(S:0-1)``), its state and Slurm's
reason for it, and the partitions it is in.

Invariants: ``parse_nodes`` is pure (golden-tested on Slurm's text);
``partition_nodes`` runs one ``scontrol`` through ``commands.run_slurm`` and
never a shell; a value Slurm leaves out (``(null)``, ``N/A``) reads as none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ringleader.slurm.states import node_ready

__all__ = ["SlurmNode", "gres_gpus", "parse_nodes", "partition_nodes"]

_FIELD_START = re.compile(r" (?=[A-Za-z][A-Za-z0-9:/_]*=)")
_GPU = re.compile(r"^gpu(?::(?P<model>[^:(]+))?:(?P<count>\d+)")
_NONE = ("", "(null)", "N/A", "None", "none")


@dataclass(frozen=True)
class SlurmNode:
    name: str
    cpus: int
    memory_mb: int
    gpus: int
    gpu_model: str
    state: str  # Slurm's, e.g. IDLE, MIXED+DRAIN
    reason: str  # Slurm's Reason, "" when none
    partitions: tuple[str, ...]
    address: str

    @property
    def ready(self) -> bool:
        return node_ready(self.state, self.reason)[0]

    @property
    def message(self) -> str:
        return node_ready(self.state, self.reason)[1]


def gres_gpus(gres: str) -> tuple[int, str]:
    """(GPU count, model) of a ``Gres`` value: ``gpu:a100:2(S:0),gpu:a100:2(S:1)`` ->
    (4, "a100"); no GPU -> (0, "")."""
    count, models = 0, []
    for entry in _split_gres(gres):
        match = _GPU.match(entry)
        if match:
            count += int(match["count"])
            if match["model"]:
                models.append(match["model"])
    return count, ",".join(dict.fromkeys(models))


def _split_gres(gres: str) -> list[str]:
    """Top-level comma split (a socket list ``(S:0,1)`` keeps its comma)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(gres):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(gres[start:i])
            start = i + 1
    out.append(gres[start:])
    return [e.strip() for e in out if e.strip() and e.strip() not in _NONE]


def _record(line: str) -> dict[str, str]:
    raw: dict[str, str] = {}
    for item in _FIELD_START.split(line.strip()):
        key, _, value = item.partition("=")
        raw[key] = value.strip()
    return raw


def _int(value: str | None) -> int:
    return int(value) if value and value.isdigit() else 0


def parse_nodes(text: str) -> list[SlurmNode]:
    """Every node of ``scontrol show node -o`` output (one ``NodeName=`` line each)."""
    nodes = []
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        raw = _record(line)
        gpus, model = gres_gpus(raw.get("Gres", ""))
        reason = raw.get("Reason", "")
        partitions = raw.get("Partitions", "")
        nodes.append(
            SlurmNode(
                name=raw["NodeName"],
                cpus=_int(raw.get("CPUTot")),
                memory_mb=_int(raw.get("RealMemory")),
                gpus=gpus,
                gpu_model=model,
                state=raw.get("State", "UNKNOWN"),
                reason="" if reason in _NONE else reason,
                partitions=tuple(p for p in partitions.split(",") if p and p not in _NONE),
                address=raw.get("NodeAddr", "") if raw.get("NodeAddr") not in _NONE else "",
            )
        )
    return nodes


def partition_nodes(partition: str) -> list[SlurmNode]:
    """The nodes of ``partition``, in Slurm's order (one ``scontrol show node``)."""
    from ringleader.slurm.commands import run_slurm

    out = run_slurm(["scontrol", "show", "node", "-o"])
    return [n for n in parse_nodes(out) if partition in n.partitions]

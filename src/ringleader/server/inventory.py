"""The nodes a server places pods on: this machine, or declared simulated ones.

Nomenclature:
- *local node*: this machine as the local backend sees it: its CPU cores,
  memory and GPUs (from ``nvidia-smi`` when present), pool ``default``.
- *simulated nodes*: declared with ``--simulate-nodes 4x8gpu`` or a YAML
  inventory (``--nodes-file``); pods placed on them run on this machine with
  the environment a real node would give them (CUDA_VISIBLE_DEVICES for the
  devices they were bound to, the share of a fraction), so quotas, fractions
  and preemption can be tried without GPUs.  They say so everywhere: kind
  ``simulated`` in the API, ``nodes list`` and ``top node``.

Invariants: ``declared_nodes`` is pure (parses text into ``NodeDecl``) and
names the field or file:line of a bad entry; ``sync_nodes`` makes the
``nodes`` table hold exactly the declared local/simulated nodes, keeping
other kinds (SSH hosts) untouched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.errors import InvalidSpec
from ringleader.sched import DEFAULT_POOL
from ringleader.server import node_kinds
from ringleader.server.models import Node
from ringleader.spec_limits import parse_quantity

SIMULATED_GPU_MEMORY = 80 * 10**9  # an 80G device (decimal, as --gpu-memory 40G reads)
SIMULATED_CPU_PER_GPU = 8
SIMULATED_MEMORY_PER_GPU = 64 * 10**9
#: The container runtime a node runs image pods with ("podman 4.3.1"; "" for none).
RUNTIME_FACT = "containerRuntime"
#: Why a node's installed runtime does not work (its ``version`` failed); absent if none.
RUNTIME_ERROR_FACT = "containerRuntimeError"
STAND_IN_GPUS = 8  # simulated GPUs of a local node that has none
_GROUP = re.compile(
    r"^(?P<count>\d+)x(?P<gpus>\d+)gpu(?::(?P<memory>[0-9.]+[A-Za-z]*))?(?:@(?P<pool>[a-z0-9-]+))?$"
)
LOCAL_KINDS = node_kinds.DECLARED  # what sync_nodes owns


@dataclass(frozen=True)
class NodeDecl:
    name: str
    kind: str
    cpu_cores: float
    memory_bytes: int
    gpus: tuple[dict[str, Any], ...] = ()
    pool: str = DEFAULT_POOL
    labels: dict[str, str] = field(default_factory=dict)
    address: str = "127.0.0.1"
    message: str = ""
    ready: bool = True
    facts: dict[str, Any] = field(default_factory=dict)  # what was found on it


def declared_nodes(simulate: str | None, nodes_file: Path | None) -> list[NodeDecl] | None:
    """The server's ``--simulate-nodes`` and ``--nodes-file`` together; None for neither
    (this machine is then the node)."""
    if not simulate and not nodes_file:
        return None
    nodes = simulated_nodes(simulate) if simulate else []
    if nodes_file:
        nodes += inventory_file(nodes_file)
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise InvalidSpec("a node name is declared twice", "--nodes-file")
    return nodes


def simulated_nodes(text: str) -> list[NodeDecl]:
    """``4x8gpu`` -> sim-0..sim-3 with 8 GPUs of 80G each; groups are
    comma-separated, ``:40G`` sets each GPU's memory, ``@pool`` the node pool
    (``2x8gpu@a100,4x4gpu:24G@l4``)."""
    nodes: list[NodeDecl] = []
    for group in (g.strip() for g in text.split(",")):
        match = _GROUP.match(group)
        if not match:
            raise InvalidSpec(
                f"{group!r} is not NxMgpu[:GPU_MEMORY][@POOL] (e.g. 4x8gpu, 2x4gpu:40G@a100)",
                "--simulate-nodes",
            )
        count, gpus = int(match["count"]), int(match["gpus"])
        if count < 1 or count > 10_000 or gpus > 1024:
            raise InvalidSpec(f"{group!r}: 1..10000 nodes of 0..1024 GPUs", "--simulate-nodes")
        memory = parse_quantity(match["memory"]) if match["memory"] else SIMULATED_GPU_MEMORY
        pool = match["pool"] or DEFAULT_POOL
        for _ in range(count):
            nodes.append(
                NodeDecl(
                    name=f"sim-{len(nodes)}",
                    kind=node_kinds.SIMULATED,
                    cpu_cores=float(max(1, gpus) * SIMULATED_CPU_PER_GPU),
                    memory_bytes=max(1, gpus) * SIMULATED_MEMORY_PER_GPU,
                    gpus=tuple({"index": i, "memoryBytes": memory} for i in range(gpus)),
                    pool=pool,
                )
            )
    return nodes


def inventory_file(path: Path) -> list[NodeDecl]:
    """A YAML list of simulated nodes, each: name, gpus, gpuMemory, cpu, memory,
    pool, labels.  Errors name ``file:line``."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InvalidSpec(f"cannot read {path}: {exc.strerror}", str(path)) from None
    loader = yaml.SafeLoader(text)
    try:  # one parse: the node tree for line numbers, then the data from it
        document = loader.get_single_node()
        data = loader.construct_document(document) if document is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InvalidSpec(f"not valid YAML: {getattr(exc, 'problem', exc)}", where) from None
    finally:
        loader.dispose()
    items = data.get("nodes") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise InvalidSpec("expected a list of nodes (or a mapping with `nodes:`)", str(path))
    lines = _item_lines(document)
    nodes = []
    for i, item in enumerate(items):
        where = f"{path}:{lines[i] if i < len(lines) else 1}"
        nodes.append(_node_from(item, where))
    names = [n.name for n in nodes]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise InvalidSpec(f"node {duplicate!r} is declared twice", str(path))
    return nodes


def _item_lines(document: Any) -> list[int]:
    node = document
    if isinstance(node, yaml.MappingNode):
        node = next((v for k, v in node.value if k.value == "nodes"), None)
    if not isinstance(node, yaml.SequenceNode):
        return []
    return [item.start_mark.line + 1 for item in node.value]


def _node_from(item: Any, where: str) -> NodeDecl:
    if not isinstance(item, dict):
        raise InvalidSpec("each node is a mapping with at least `name`", where)
    known = {"name", "gpus", "gpuMemory", "cpu", "memory", "pool", "labels"}
    unknown = sorted(set(item) - known)
    if unknown:
        raise InvalidSpec(f"unknown field {unknown[0]!r}; fields: {sorted(known)}", where)
    name = item.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name):
        raise InvalidSpec("name: lower-case letters, digits, - and . (e.g. gpu-node-1)", where)
    gpus = _field(item, "gpus", 0, _count, name, where)
    cpu = _field(item, "cpu", max(1, gpus) * SIMULATED_CPU_PER_GPU, _positive, name, where)
    memory = _field(item, "memory", max(1, gpus) * SIMULATED_MEMORY_PER_GPU, _bytes, name, where)
    gpu_memory = _field(item, "gpuMemory", SIMULATED_GPU_MEMORY, _bytes, name, where)
    pool = str(item.get("pool") or DEFAULT_POOL)
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", pool):
        raise InvalidSpec(f"node {name}: pool: lower-case letters, digits and - (e.g. a100)", where)
    labels = item.get("labels") or {}
    if not isinstance(labels, dict):
        raise InvalidSpec(f"node {name}: labels is a mapping", where)
    return NodeDecl(
        name=name,
        kind=node_kinds.SIMULATED,
        cpu_cores=cpu,
        memory_bytes=memory,
        gpus=tuple({"index": i, "memoryBytes": gpu_memory} for i in range(gpus)),
        pool=pool,
        labels={str(k): str(v) for k, v in labels.items()},
    )


def _field(item: dict[str, Any], key: str, default: Any, parse: Any, node: str, where: str) -> Any:
    """``item[key]`` parsed, or ``default``; a bad value names the node and field."""
    if key not in item:
        return default
    try:
        return parse(item[key])
    except (TypeError, ValueError) as exc:
        raise InvalidSpec(f"node {node}: {key}: {exc}", where) from None


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a whole number >= 0")
    return value


def _positive(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{value!r} is not a number > 0")
    return float(value)


def _bytes(value: Any) -> int:
    """Bytes from a number or a quantity (``80G``, ``24Gi``); must be > 0."""
    amount = _positive(value) if isinstance(value, (int, float)) else parse_quantity(str(value))
    if amount <= 0:
        raise ValueError(f"{value!r} is not an amount > 0")
    return int(amount)


def local_node(name: str, stand_in_gpus: int = STAND_IN_GPUS) -> NodeDecl:
    """This machine: cores, memory (``/proc/meminfo``) and GPUs (``nvidia-smi``).

    Without a GPU it gets ``stand_in_gpus`` simulated ones (marked so, each
    ``"simulated": true``), so that the Run:ai workflows with ``-g 0.1`` or
    ``gpuPortionRequest`` still run on a laptop; their pods run on the CPU.
    """
    gpus = nvidia_gpus()
    message = ""
    if not gpus and stand_in_gpus:
        gpus = [
            {"index": i, "memoryBytes": SIMULATED_GPU_MEMORY, "simulated": True}
            for i in range(stand_in_gpus)
        ]
        message = f"no GPU found: {stand_in_gpus} simulated GPUs stand in (pods run on the CPU)"
    from ringleader.launch.container_runtime import detected

    runtime = detected()
    return NodeDecl(
        name=name,
        kind=node_kinds.LOCAL,
        cpu_cores=float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1),
        memory_bytes=_memory_total(),
        gpus=tuple(gpus),
        message=message,
        facts={RUNTIME_FACT: f"{runtime['name']} {runtime['version']}" if runtime else ""},
    )


def _memory_total() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def nvidia_gpus() -> list[dict[str, Any]]:
    """Devices ``nvidia-smi`` lists, in CUDA_VISIBLE_DEVICES order; [] without one."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,memory.total,name", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            gpus.append(
                {
                    "index": int(parts[0]),
                    "memoryBytes": int(float(parts[1])) * 2**20,
                    "model": parts[2],
                }
            )
    return gpus


def sync_nodes(session: Session, declared: list[NodeDecl]) -> None:
    """Make the local and simulated rows exactly ``declared`` (SSH nodes untouched)."""
    rows = {n.name: n for n in session.scalars(select(Node))}
    wanted = {d.name for d in declared}
    for name, row in rows.items():
        if row.kind in LOCAL_KINDS and name not in wanted:
            session.delete(row)
    session.flush()
    for decl in declared:
        row = rows.get(decl.name)
        if row is not None and row.kind not in LOCAL_KINDS:
            raise InvalidSpec(
                f"node {decl.name!r} is already registered as a {row.kind} node", "--simulate-nodes"
            )
        if row is None or row.kind not in LOCAL_KINDS:
            row = Node(name=decl.name)
            session.add(row)
        row.kind, row.pool, row.address = decl.kind, decl.pool, decl.address
        row.cpu_cores, row.memory_bytes = decl.cpu_cores, decl.memory_bytes
        row.gpus, row.labels = [dict(g) for g in decl.gpus], dict(decl.labels)
        row.ready, row.message = decl.ready, decl.message
        row.facts = dict(decl.facts)

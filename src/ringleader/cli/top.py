"""``nodes list``, ``top node`` and ``top job``: capacity and what the scheduler allocated.

Allocation is what the scheduler bound to pods (their requests), as in
Run:ai's ``top node``; simulated nodes are marked so in every view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.table import Table

from ringleader.cli.common import client, console, err_console, reports_errors
from ringleader.sched.text import decimal_size

if TYPE_CHECKING:
    from ringleader.server.schemas import NodeOut

nodes_app = typer.Typer(
    help="Nodes the scheduler places pods on.\n\nExample: ringleader nodes list",
    no_args_is_help=True,
)
top_app = typer.Typer(
    help="Allocation against capacity: nodes or jobs.\n\nExample: ringleader top job -A",
    no_args_is_help=True,
)


def _kind(node: NodeOut) -> str:
    if node.simulated:
        return "simulated"
    stand_ins = any(g.simulated for g in node.gpus)
    return f"{node.kind}{STAND_IN_MARK}" if stand_ins else node.kind


STAND_IN_MARK = "*"  # a node whose GPUs are simulated stand-ins: said under the table
STAND_IN_NOTE = (
    f"{STAND_IN_MARK} simulated GPUs stand in for devices it lacks (pods run on the CPU)"
)


def _footnote(nodes: list[NodeOut]) -> None:
    if any(n.kind != "simulated" and any(g.simulated for g in n.gpus) for n in nodes):
        console.print(STAND_IN_NOTE, soft_wrap=True)


def runtime_of(node: NodeOut) -> str:
    """What runs the node's pods of a workload with an image (its container runtime)."""
    found = node.facts.get("containerRuntime")
    if found:
        return f"image pods run with {found}"
    if node.facts.get("containerRuntimeError"):
        return f"container runtime broken ({node.facts['containerRuntimeError']}): no image pods"
    if "containerRuntime" in node.facts:
        return "no container runtime (podman or docker): workloads with an image cannot run"
    return "container runtime unknown"


@nodes_app.command("list")
@reports_errors
def nodes_list() -> None:
    """Each node's resources and allocation (GPUs, CPU, memory), pool and status.

    Example: ringleader nodes list
    """
    table = Table(
        "NODE", "KIND", "POOL", "STATUS", "GPUs", "GPU MEM", "CPU", "MEMORY",
        "GPUs USED", "PODS", box=None,
    )  # fmt: skip
    nodes = client().nodes()
    for n in nodes:
        memory = {g.memory_bytes for g in n.gpus}
        table.add_row(
            n.name,
            _kind(n),
            n.pool,
            n.status,
            str(n.gpu_count),
            "/".join(decimal_size(m) for m in sorted(memory)) or "-",
            f"{n.cpu_cores:g}",
            decimal_size(n.memory_bytes),
            f"{n.allocated_gpus:g}",
            str(len(n.pods)),
        )
    console.print(table)
    _footnote(nodes)
    for n in nodes:
        if n.kind != "simulated":  # a simulated node's pods run on the server's machine
            console.print(f"{n.name}: {runtime_of(n)}", soft_wrap=True, highlight=False)
    for n in nodes:
        if n.status != "Ready":
            err_console.print(f"[yellow]{n.name}[/] is NotReady: {n.message}", soft_wrap=True)


@top_app.command("node")
@reports_errors
def top_node() -> None:
    """Allocation against capacity per node, and each GPU device's share in use.

    Example: ringleader top node
    """
    table = Table(
        "NODE", "KIND", "STATUS", "GPUs (allocated/total)", "DEVICES", "CPU (allocated/total)",
        "MEMORY (allocated/total)", box=None,
    )  # fmt: skip
    nodes = client().nodes()
    for n in nodes:
        devices = " ".join(f"{g.index}:{g.allocated:.2g}" for g in n.gpus) or "-"
        table.add_row(
            n.name,
            _kind(n),
            n.status,
            f"{n.allocated_gpus:g}/{n.gpu_count}",
            devices,
            f"{n.allocated_cpu_cores:g}/{n.cpu_cores:g}",
            f"{decimal_size(n.allocated_memory_bytes)}/{decimal_size(n.memory_bytes)}",
        )
    console.print(table)
    _footnote(nodes)


@top_app.command("job")
@reports_errors
def top_job(
    all_projects: bool = typer.Option(False, "-A", "--all-projects", help="Every project."),
    project: str = typer.Option(
        None, "-p", "--project", metavar="NAME", help="Project (default: current)."
    ),
) -> None:
    """Running and pending workloads with GPUs allocated against requested, and where.

    Example: ringleader top job -A
    """
    c = client()
    filters = [] if all_projects else [f"projectName=={project or c.project or 'default'}"]
    table = Table(
        "NAME", "PROJECT", "STATUS", "GPUs Allocated (Requested)", "PODs Running (Requested)",
        "NODES", "PENDING REASON", box=None,
    )  # fmt: skip
    active = ("Pending", "Initializing", "Running", "Degraded", "Unknown")
    for w in c.list_workloads(filters, limit=500).workloads:
        if w.actual_phase not in active:
            continue
        table.add_row(
            w.name,
            w.project_name,
            w.actual_phase,
            f"{w.allocated_gpus:g} ({w.requested_gpus:g})",
            f"{w.running_pods} ({w.requested_pods})",
            ", ".join(w.nodes) or "-",
            w.pending_reason or "",
        )
    console.print(table)

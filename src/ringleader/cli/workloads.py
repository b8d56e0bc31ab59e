"""Run:ai CLI v1 verbs: submit-dist, submit-mpi, list, describe/get, logs, delete, suspend...

The submit commands share their options (``cli/submit_options.py``); every
command reads and prints the client's typed models (``WorkloadOut``...).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from ringleader.cli.common import age, client, console, reports_errors
from ringleader.cli.submit_options import EXTRA, POD, V1_COMPUTE, SubmitOptions, submit_options
from ringleader.spec import Framework

if TYPE_CHECKING:
    from ringleader.server.schemas import Accepted, PodOut

submit_dist = typer.Typer(
    help="Submit a distributed workload: `submit-dist pytorch|mpi NAME --workers N -- CMD`.",
    no_args_is_help=True,
)
V1 = (*V1_COMPUTE, *POD, "project", "name_prefix")  # submit-dist's options, after --workers


def submit(options: SubmitOptions, framework: Framework | None = None) -> tuple[Accepted, str]:
    """Send the workload the options describe; what the server accepted, and its project."""
    from ringleader.cli.submit_options import with_assets
    from ringleader.connection import current_project

    if framework is not None:
        options.framework = framework.value
    spec = options.spec(current_project())  # bad input is refused before any server starts
    c = client()
    spec = with_assets(spec, options, c)  # --environment-asset, --compute: flags win
    return c.submit_distributed(spec), spec.project_id


def _submitted(options: SubmitOptions, framework: Framework) -> None:
    accepted, project = submit(options, framework)
    console.print(
        f"The workload '{accepted.name}' has been submitted successfully "
        f"(id {accepted.workload_id}, project {project})"
    )


@submit_dist.command("pytorch", context_settings=EXTRA)
@reports_errors
@submit_options(
    "name",
    "workers",
    *V1,
    name=typer.Argument(..., help="Workload name (DNS-1123: lowercase, digits, '-')."),
    workers=typer.Option(..., "--workers", help="Worker pods besides the master."),
)
def submit_pytorch(ctx: typer.Context, options: SubmitOptions) -> None:
    """Submit a PyTorch workload: 1 master + N workers; what follows -- is the command.

    Example:

      ringleader submit-dist pytorch mnist --workers 2 -- python -m ringleader.examples.digits
    """
    _submitted(options, Framework.PYTORCH)


@submit_dist.command("mpi", context_settings=EXTRA)
@reports_errors
@submit_options(
    "name",
    "workers",
    "slots_per_worker",
    *V1,
    workers=typer.Option(
        ..., "--workers", help="Worker pods (ranks come from them; a launcher runs mpirun)."
    ),
)
def submit_mpi_dist(ctx: typer.Context, options: SubmitOptions) -> None:
    """Submit an MPI workload (Horovod, mpi4py): a launcher runs mpirun over N workers.

    Example: ringleader submit-dist mpi dist --workers 2 -- python -m mpi4py.bench helloworld
    """
    _submitted(options, Framework.MPI)


@reports_errors
@submit_options(
    "name",
    "workers",
    "gpu",
    "cpu",
    "memory",
    "env",
    "working_dir",
    "backoff_limit",
    "interactive",
    "image",
    "project",
    workers=typer.Option(..., "--processes", help="Worker processes (pods)."),
)
def submit_mpi(ctx: typer.Context, options: SubmitOptions) -> None:
    """Submit an MPI workload (old Run:ai verb; same as `submit-dist mpi --workers`).

    Example: ringleader submit-mpi dist --processes 2 -- python -m mpi4py.bench helloworld
    """
    _submitted(options, Framework.MPI)


def _phase_style(phase: str) -> str:
    return {"Running": "green", "Completed": "cyan", "Failed": "red", "Pending": "yellow"}.get(
        phase, "white"
    )


@reports_errors
def list_workloads(
    all_projects: bool = typer.Option(
        False, "-A", "--all-projects", help="Workloads of every project."
    ),
    project: str = typer.Option(
        None, "-p", "--project", help="Project (default: the current one)."
    ),
) -> None:
    """List workloads with Run:ai's columns.

    Example: ringleader list -A
    """
    c = client()
    filters = [] if all_projects else [f"projectName=={project or c.project or 'default'}"]
    table = Table(
        "NAME",
        "STATUS",
        "AGE",
        "NODE",
        "IMAGE",
        "TYPE",
        "PROJECT",
        "USER",
        "GPUs Allocated (Requested)",
        "PODs Running (Pending)",
        box=None,
    )
    rows = c.list_workloads(filters, limit=500).workloads
    reasons = any(w.pending_reason for w in rows)
    if reasons:  # why the scheduler left some Pending, after Run:ai's columns
        table.add_column("PENDING REASON", overflow="fold")
    for w in rows:
        cells = [
            w.name,
            f"[{_phase_style(w.actual_phase)}]{w.actual_phase}[/]",
            age(w.created_at),
            ", ".join(w.nodes) or "-",
            w.image or "-",
            f"{w.framework} distributed",
            w.project_name,
            w.created_by or "-",
            f"{w.allocated_gpus:g} ({w.requested_gpus:g})",
            f"{w.running_pods} ({w.pending_pods})",
        ]
        table.add_row(*cells, *([w.pending_reason or ""] if reasons else []))
    console.print(table)


def gpu_text(gpus: list[dict[str, Any]]) -> str:
    """``0, 1`` for whole devices; ``0 (0.5)`` / ``2 (40G)`` for fractions."""
    parts = []
    for g in gpus:
        if g.get("memoryBytes"):
            parts.append(f"{g['index']} ({g['memoryBytes'] / 10**9:.3g}G)")
        elif g.get("share", 1) < 1:
            parts.append(f"{g['index']} ({g['share']:g})")
        else:
            parts.append(str(g["index"]))
    return ", ".join(parts) or "-"


@reports_errors
def describe(
    name: str = typer.Argument(..., help="Workload name or id."),
    project: str = typer.Option(None, "-p", "--project"),
) -> None:
    """Show a workload: spec, phase with its reason, pods, events.

    Example: ringleader describe mnist
    """
    c = client()
    w = c.find(name, project)
    spec = w.spec["spec"]  # the stored WorkloadSpec, as submitted (camelCase)
    console.print(f"[bold]Name:[/bold] {w.name}   [bold]Id:[/bold] {w.workload_id}")
    console.print(
        f"Project: {w.project_name}   Type: {w.framework} distributed   User: {w.created_by}"
    )
    reason = (
        f" ({w.phase_reason}: {w.phase_message})"
        if w.phase_message
        else (f" ({w.phase_reason})" if w.phase_reason else "")
    )
    console.print(
        f"Status: {w.actual_phase}{reason}   Desired: {w.desired_phase}   Attempt: {w.attempt}"
    )
    console.print(f"Command: {spec.get('command', '')} {spec.get('args', '')}".rstrip())
    console.print(
        f"Workers: {spec['numWorkers']}   Image: {spec.get('image') or '-'}   "
        f"Working dir: {spec.get('workingDir') or '-'}   "
        f"Backoff limit: {spec.get('backoffLimit', 6)}"
    )
    if spec.get("compute"):
        console.print("Compute: " + ", ".join(f"{k}={v}" for k, v in spec["compute"].items()))
    console.print(
        f"GPUs: {w.allocated_gpus:g} allocated of {w.requested_gpus:g} requested"
        + (f"   Nodes: {', '.join(w.nodes)}" if w.nodes else "")
    )
    console.print(_pods_table(c.pods(w.workload_id)))
    events = Table(
        "TIME", "TYPE", "POD", "FROM", "TO", "REASON", "MESSAGE", box=None, title="Events"
    )
    for e in c.events(w.workload_id):
        events.add_row(
            e.time.strftime("%H:%M:%S"),
            e.type,
            e.pod_name or "",
            e.from_phase or "",
            e.to_phase or "",
            e.reason,
            e.message[:120],
        )
    console.print(events)


def _pods_table(rows: list[PodOut]) -> Table:
    pods = Table(
        "POD", "ROLE", "STATUS", "NODE", "GPUs", "EXIT CODE", "ATTEMPT", "RANKS",
        "PEAK MEMORY", "CPU TIME", "ISOLATION", box=None, title="Pods",
    )  # fmt: skip
    for p in rows:
        pods.add_row(
            p.name,
            p.role,
            p.status,
            p.node or "-",
            gpu_text(p.gpus),
            "-" if p.exit_code is None else str(p.exit_code),
            str(p.attempt),
            ",".join(map(str, p.ranks)) or "-",
            "-" if p.peak_memory_bytes is None else _bytes_text(p.peak_memory_bytes),
            "-" if p.cpu_seconds is None else f"{p.cpu_seconds:.2f}s",
            p.isolation or "-",
        )
    return pods


def _bytes_text(n: int) -> str:
    """1536 -> "1.5KiB": a measured size, binary units."""
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"


@reports_errors
def logs(
    name: str = typer.Argument(..., help="Workload name or id."),
    follow: bool = typer.Option(
        False, "-f", "--follow", help="Keep printing until the workload ends."
    ),
    pod: str = typer.Option(
        None, "--pod", help="One pod, e.g. master-0 or worker-1 (default: all, merged)."
    ),
    tail: int = typer.Option(None, "-t", "--tail", help="Only the last N lines."),
    since: str = typer.Option(None, "--since", help="Only lines newer than e.g. 5m, 2h."),
    timestamps: bool = typer.Option(False, "--timestamps", help="Prefix each line with its time."),
    project: str = typer.Option(None, "-p", "--project"),
) -> None:
    """Print a workload's logs: every pod merged and prefixed, or one pod.

    Example: ringleader logs mnist -f
    """
    c = client()
    w = c.find(name, project)
    for line in c.logs(
        w.workload_id, pod=pod, tail=tail, since=since, follow=follow, timestamps=timestamps
    ):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _action(verb: str, done: str) -> Callable[..., None]:  # one Typer command per verb
    @reports_errors
    def command(
        name: str = typer.Argument(..., help="Workload name or id."),
        project: str = typer.Option(None, "-p", "--project"),
    ) -> None:
        c = client()
        w = c.find(name, project)
        c.action(w.workload_id, verb)
        console.print(f"The workload '{w.name}' {done}")

    command.__doc__ = f"{verb.capitalize()} a workload.\n\nExample: ringleader {verb} mnist"
    return command


delete = _action("delete", "is being deleted")
suspend = _action("suspend", "is being suspended")
resume = _action("resume", "is being resumed")

"""``ringleader compute create|list|describe|delete``: compute-resource assets (Run:ai's),
what each pod asks for, named at submit with ``--compute NAME``. Shares its helpers
with ``cli/assets.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from ringleader.cli.assets import (
    OUTPUT_OPTION,
    PROJECT_OPTION,
    SCOPE_OPTION,
    build_request,
    find_one,
    meta_fields,
    print_assets,
    where_text,
)
from ringleader.cli.common import age, client, console, reports_errors
from ringleader.errors import InvalidSpec

if TYPE_CHECKING:
    from ringleader.server.asset_schemas import ComputeAsset

COMPUTE_HELP = "Compute-resource assets: GPUs, CPU, memory per pod; named at submit (--compute)."
compute_app = typer.Typer(
    help=f"{COMPUTE_HELP}\n\nExample: ringleader compute create small-fraction -g 0.1",
    no_args_is_help=True,
)
# The API field a validation error names -> the flag that set it.
COMPUTE_FLAGS = {
    "name": "NAME",
    "description": "--description",
    "scope": "--scope",
    "projectId": "-p/--project",
    "gpuDevicesRequest": "-g/--gpu",
    "gpuRequestType": "-g/--gpu",
    "gpuPortionRequest": "-g/--gpu",
    "gpuMemoryRequest": "--gpu-memory",
    "cpuCoreRequest": "--cpu",
    "cpuCoreLimit": "--cpu-limit",
    "cpuMemoryRequest": "--memory",
    "cpuMemoryLimit": "--memory-limit",
    "spec": "-g/--gpu",
}


def _gpu(gpu: float | None, gpu_memory: str | None) -> dict[str, Any]:
    """Run:ai v1's ``-g``: below 1 a portion of one device, else whole devices;
    ``--gpu-memory``: an amount of one device's memory."""
    if gpu is not None and gpu_memory is not None:
        raise InvalidSpec("give -g/--gpu or --gpu-memory, not both", "-g/--gpu")
    if gpu_memory is not None:
        return {"gpuDevicesRequest": 1, "gpuRequestType": "memory", "gpuMemoryRequest": gpu_memory}
    if gpu is None:
        return {}
    if gpu < 0:
        raise InvalidSpec("must be 0 or more", "-g/--gpu")
    if 0 < gpu < 1:
        return {"gpuDevicesRequest": 1, "gpuRequestType": "portion", "gpuPortionRequest": gpu}
    if gpu != int(gpu):
        raise InvalidSpec("above 1, GPUs are whole devices (e.g. 2)", "-g/--gpu")
    return {"gpuDevicesRequest": int(gpu)}


@compute_app.command("create")
@reports_errors
def compute_create(
    name: str = typer.Argument(
        ..., metavar="NAME", help="Asset name (DNS-1123: lowercase, digits, '-')."
    ),
    gpu: float = typer.Option(
        None,
        "-g",
        "--gpu",
        metavar="GPUS",
        help="GPUs per pod; below 1 a portion of one device (e.g. 0.1).",
    ),
    gpu_memory: str = typer.Option(
        None, "--gpu-memory", metavar="SIZE", help="GPU memory per pod from one device, e.g. 4G."
    ),
    cpu: float = typer.Option(
        None, "--cpu", metavar="CORES", help="CPU cores per pod (request), e.g. 0.1."
    ),
    cpu_limit: float = typer.Option(
        None, "--cpu-limit", metavar="CORES", help="At most this many cores."
    ),
    memory: str = typer.Option(
        None, "--memory", metavar="SIZE", help="CPU memory per pod (request), e.g. 100M."
    ),
    memory_limit: str = typer.Option(
        None, "--memory-limit", metavar="SIZE", help="At most this much memory."
    ),
    description: str = typer.Option(
        None, "--description", metavar="TEXT", help="One line about it."
    ),
    project: str = PROJECT_OPTION,
    scope: str = SCOPE_OPTION,
) -> None:
    """Create a compute-resource asset to name at submit (seed 002's "small-fraction").

    Example: ringleader compute create small-fraction -g 0.1 --cpu 0.1 --memory 100M
    """
    from ringleader.server.asset_schemas import ComputeCreationRequest

    c = client()
    spec: dict[str, Any] = {
        **_gpu(gpu, gpu_memory),
        "cpuCoreRequest": cpu,
        "cpuCoreLimit": cpu_limit,
        "cpuMemoryRequest": memory,
        "cpuMemoryLimit": memory_limit,
    }
    body = {
        "meta": meta_fields(name, scope, project, description, c),
        "spec": {key: value for key, value in spec.items() if value is not None},
    }
    made = c.create_compute_resource(build_request(ComputeCreationRequest, body, COMPUTE_FLAGS))
    console.print(
        f"Compute resource '{made.meta.name}' created for {where_text(made.meta)} "
        f"(id {made.meta.id}).\n"
        f"Use it: ringleader submit-dist pytorch NAME --workers 2 --compute {made.meta.name}"
    )


def gpu_text(spec: Any) -> str:
    """What a compute block asks of GPUs: ``0.1``, ``2``, ``4G``, or ``-``."""
    if spec.gpu_request_type == "memory" and spec.gpu_memory_request:
        return f"{spec.gpu_memory_request} (memory)"
    if spec.gpu_devices_request is None and spec.gpu_portion_request is None:
        return "-"
    return f"{spec.gpus:g}"


def _compute_table(entries: list[ComputeAsset]) -> Table:
    table = Table("NAME", "SCOPE", "PROJECT", "GPU", "CPU", "MEMORY", "AGE", box=None)
    table.columns[0].no_wrap = True
    for e in entries:
        s = e.spec
        table.add_row(
            e.meta.name,
            e.meta.scope,
            e.meta.project_name or "-",
            gpu_text(s),
            "-" if s.cpu_core_request is None else f"{s.cpu_core_request:g}",
            s.cpu_memory_request or "-",
            age(e.meta.created_at),
        )
    return table


@compute_app.command("list")
@reports_errors
def compute_list(
    project: str = PROJECT_OPTION,
    all_projects: bool = typer.Option(
        False, "-A", "--all", help="Every project's you can see, not one project's."
    ),
    output: str = OUTPUT_OPTION,
) -> None:
    """List the compute resources a project can use: its own and every project's.

    Example: ringleader compute list
    """
    c = client()
    entries = c.compute_resources(None if all_projects else (project or c.project or "default"))
    print_assets(entries, output, lambda: _compute_table(entries))


@compute_app.command("describe")
@reports_errors
def compute_describe(
    name: str = typer.Argument(..., metavar="NAME", help="Asset name (or id)."),
    project: str = PROJECT_OPTION,
    output: str = OUTPUT_OPTION,
) -> None:
    """Show a compute-resource asset: what each pod asks for.

    Example: ringleader compute describe small-fraction
    """
    c = client()
    e = find_one(c, c.find_compute_resource, c.compute_resource, name, project)

    def table() -> Table:
        rows = Table(box=None, show_header=False)
        rows.add_row("Name", e.meta.name)
        rows.add_row("Id", e.meta.id)
        rows.add_row("Scope", e.meta.scope)
        rows.add_row("Project", e.meta.project_name or "- (every project sees it)")
        rows.add_row("Description", e.meta.description or "-")
        rows.add_row("GPU per pod", gpu_text(e.spec))
        for field, value in e.spec.model_dump(by_alias=True, exclude_none=True).items():
            rows.add_row(field, str(value))
        rows.add_row("Created", f"{age(e.meta.created_at)} ago by {e.meta.created_by}")
        return rows

    print_assets(e, output, table)


@compute_app.command("delete")
@reports_errors
def compute_delete(
    name: str = typer.Argument(..., metavar="NAME", help="Asset name (or id)."),
    project: str = PROJECT_OPTION,
) -> None:
    """Delete a compute-resource asset (workloads submitted with it keep their values).

    Example: ringleader compute delete small-fraction
    """
    c = client()
    e = find_one(c, c.find_compute_resource, c.compute_resource, name, project)
    c.delete_compute_resource(e.meta.id)
    console.print(f"Compute resource '{e.meta.name}' deleted from {where_text(e.meta)}")

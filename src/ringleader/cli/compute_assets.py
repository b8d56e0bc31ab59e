"""``ringleader compute create|list|describe|delete``: compute-resource assets (Run:ai's),
what each pod asks for, named at submit with ``--compute NAME``. What it shares
with ``cli/assets.py`` is in ``cli/asset_common.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from ringleader.cli.asset_common import (
    DESCRIPTION_OPTION,
    META_FLAGS,
    NEW_NAME_ARGUMENT,
    PROJECT_OPTION,
    SCOPE_OPTION,
    AssetKind,
    add_read_commands,
    asset_row,
    asset_table,
    build_request,
    create_body,
    where_text,
)
from ringleader.cli.common import client, console, reports_errors
from ringleader.errors import InvalidSpec

if TYPE_CHECKING:
    from ringleader.server.compute_asset_schemas import (
        ComputeAsset,
    )

COMPUTE_HELP = "Compute-resource assets: GPUs, CPU, memory per pod; named at submit (--compute)."
compute_app = typer.Typer(
    help=f"{COMPUTE_HELP}\n\nExample: ringleader compute create small-fraction -g 0.1",
    no_args_is_help=True,
)
# The API field a validation error names -> the flag that set it.
COMPUTE_FLAGS = {
    **META_FLAGS,
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
    name: str = NEW_NAME_ARGUMENT,
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
    description: str = DESCRIPTION_OPTION,
    project: str = PROJECT_OPTION,
    scope: str = SCOPE_OPTION,
) -> None:
    """Create a compute-resource asset to name at submit (e.g. "small-fraction").

    Example:

      ringleader compute create small-fraction -g 0.1 --cpu 0.1 --memory 100M
    """
    from ringleader.server.compute_asset_schemas import (
        ComputeCreationRequest,
    )

    c = client()
    spec: dict[str, Any] = {
        **_gpu(gpu, gpu_memory),
        "cpuCoreRequest": cpu,
        "cpuCoreLimit": cpu_limit,
        "cpuMemoryRequest": memory,
        "cpuMemoryLimit": memory_limit,
    }
    body = create_body(name, scope, project, description, c, spec)
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
    table = asset_table("GPU", "CPU", "MEMORY")
    for e in entries:
        s = e.spec
        cpu = "-" if s.cpu_core_request is None else f"{s.cpu_core_request:g}"
        table.add_row(*asset_row(e.meta, gpu_text(s), cpu, s.cpu_memory_request or "-"))
    return table


def _compute_rows(e: ComputeAsset) -> list[tuple[str, str]]:
    stored = e.spec.model_dump(by_alias=True, exclude_none=True)
    return [("GPU per pod", gpu_text(e.spec))] + [(f, str(v)) for f, v in stored.items()]


COMPUTE = AssetKind(
    label="Compute resource",
    list_method="compute_resources",
    get_method="compute_resource",
    find_method="find_compute_resource",
    delete_method="delete_compute_resource",
    table=_compute_table,
    rows=_compute_rows,
)
add_read_commands(
    compute_app,
    COMPUTE,
    list_help="""List the compute resources a project can use: its own and every project's.

    Example: ringleader compute list
    """,
    describe_help="""Show a compute-resource asset: what each pod asks for.

    Example: ringleader compute describe small-fraction
    """,
    delete_help="""Delete a compute-resource asset (workloads submitted with it keep their values).

    Example: ringleader compute delete small-fraction
    """,
)

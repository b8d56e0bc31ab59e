"""Run:ai CLI v2: ``ringleader distributed submit|list|describe|logs|exec|delete|...``."""

from __future__ import annotations

from typing import Any

import typer

from ringleader.cli import exec as exec_cmd
from ringleader.cli import workloads as v1
from ringleader.cli.common import client, console, reports_errors
from ringleader.errors import InvalidSpec

app = typer.Typer(help="Distributed workloads, Run:ai CLI v2 style.", no_args_is_help=True)
FRAMEWORKS = {"pytorch": "PyTorch", "mpi": "MPI", "tf": "TF", "xgboost": "XGBoost", "jax": "JAX"}


@app.command("submit", context_settings=v1.EXTRA)
@reports_errors
def submit(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Workload name."),
    framework: str = typer.Option(
        "PyTorch", "--framework", help="PyTorch or MPI (TF, XGBoost, JAX: not yet)."
    ),
    workers: int = typer.Option(..., "--workers", help="Worker pods."),
    image: str = typer.Option(None, "-i", "--image"),
    gpu_devices_request: int = typer.Option(None, "--gpu-devices-request"),
    gpu_request_type: str = typer.Option(None, "--gpu-request-type", help="portion or memory"),
    gpu_portion_request: float = typer.Option(None, "--gpu-portion-request"),
    gpu_memory_request: str = typer.Option(None, "--gpu-memory-request"),
    cpu_core_request: float = typer.Option(None, "--cpu-core-request"),
    cpu_core_limit: float = typer.Option(None, "--cpu-core-limit"),
    cpu_memory_request: str = typer.Option(None, "--cpu-memory-request"),
    cpu_memory_limit: str = typer.Option(None, "--cpu-memory-limit"),
    slots_per_worker: int = typer.Option(None, "--slots-per-worker"),
    env: list[str] = typer.Option([], "-e", "--environment"),
    working_dir: str = typer.Option(None, "--working-dir"),
    backoff_limit: int = typer.Option(None, "--backoff-limit"),
    clean_pod_policy: str = typer.Option(None, "--clean-pod-policy"),
    interactive: bool = typer.Option(False, "--interactive"),
    project: str = typer.Option(None, "-p", "--project"),
) -> None:
    """Submit a distributed workload; what follows -- is the command.

    Example: ringleader distributed submit mnist --framework PyTorch --workers 2
    --gpu-request-type portion --gpu-portion-request 0.1 --gpu-devices-request 1
    --cpu-memory-request 100M -- python -m ringleader.examples.digits
    """
    fw = FRAMEWORKS.get(framework.lower())
    if fw is None:
        raise InvalidSpec(f"unknown framework {framework!r}; choose PyTorch or MPI", "--framework")
    block: dict[str, Any] = {
        "gpuDevicesRequest": gpu_devices_request,
        "gpuRequestType": gpu_request_type,
        "gpuPortionRequest": gpu_portion_request,
        "gpuMemoryRequest": gpu_memory_request,
        "cpuCoreRequest": cpu_core_request,
        "cpuCoreLimit": cpu_core_limit,
        "cpuMemoryRequest": cpu_memory_request,
        "cpuMemoryLimit": cpu_memory_limit,
    }
    c = client()
    project = project or c.project
    body = v1.workload_body(
        name,
        fw,
        workers,
        list(ctx.args),
        project=project,
        image=image,
        env=env,
        working_dir=working_dir,
        backoff_limit=backoff_limit,
        clean_pod_policy=clean_pod_policy,
        interactive=interactive,
        slots_per_worker=slots_per_worker,
        compute_block={k: v for k, v in block.items() if v is not None},
    )
    accepted = c.submit_distributed(body)
    console.print(f"Creating distributed workload {accepted['name']} (id {accepted['workloadId']})")


app.command("list")(v1.list_workloads)
app.command("describe")(v1.describe)
app.command("logs")(v1.logs)
app.command("delete")(v1.delete)
app.command("suspend")(v1.suspend)
app.command("resume")(v1.resume)
app.command("exec")(exec_cmd.exec_command)

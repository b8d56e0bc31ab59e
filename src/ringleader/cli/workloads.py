"""Run:ai CLI v1 verbs: submit-dist, submit-mpi, list, describe/get, logs, delete, suspend..."""

from __future__ import annotations

import os
import shlex
import sys
from typing import Any

import typer
from rich.table import Table

from ringleader.cli.common import age, client, console, reports_errors
from ringleader.errors import InvalidSpec

submit_dist = typer.Typer(
    help="Submit a distributed workload: `submit-dist pytorch|mpi NAME --workers N -- CMD`.",
    no_args_is_help=True,
)
EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}


def compute(
    gpu: float | None, gpu_memory: str | None, cpu: float | None, memory: str | None
) -> dict[str, Any]:
    """Run:ai's compute block from v1 flags: -g 0.1 is a portion, -g 2 two devices."""
    out: dict[str, Any] = {}
    if gpu is not None and gpu_memory is not None:
        raise InvalidSpec("give -g/--gpu or --gpu-memory, not both", "--gpu")
    if gpu is not None:
        if gpu <= 0:
            raise InvalidSpec("must be > 0", "--gpu")
        if gpu < 1:
            out |= {"gpuDevicesRequest": 1, "gpuRequestType": "portion", "gpuPortionRequest": gpu}
        elif gpu != int(gpu):
            raise InvalidSpec("above 1, GPUs must be whole devices", "--gpu")
        else:
            out["gpuDevicesRequest"] = int(gpu)
    if gpu_memory is not None:
        out |= {"gpuDevicesRequest": 1, "gpuRequestType": "memory", "gpuMemoryRequest": gpu_memory}
    if cpu is not None:
        out["cpuCoreRequest"] = cpu
    if memory is not None:
        out["cpuMemoryRequest"] = memory
    return out


def workload_body(
    name: str,
    framework: str,
    workers: int,
    command: list[str],
    *,
    project: str | None,
    image: str | None = None,
    env: list[str] = (),
    working_dir: str | None = None,
    backoff_limit: int | None = None,
    clean_pod_policy: str | None = None,
    interactive: bool = False,
    slots_per_worker: int | None = None,
    name_prefix: bool = False,
    compute_block: dict[str, Any] | None = None,
) -> dict[str, Any]:
    variables = []
    for pair in env:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidSpec(f"expected KEY=VALUE, got {pair!r}", "-e/--environment")
        variables.append({"name": key, "value": value})
    spec: dict[str, Any] = {
        "numWorkers": workers,
        "distributedFramework": framework,
        "image": image,
        "command": shlex.join(command) if command else None,
        "workingDir": working_dir or os.getcwd(),
        "environmentVariables": variables,
        "compute": compute_block or {},
        "interactive": interactive,
        "backoffLimit": backoff_limit,
        "cleanPodPolicy": clean_pod_policy,
        "slotsPerWorker": slots_per_worker,
    }
    return {
        "name": name,
        "projectId": project or "default",
        "useGivenNameAsPrefix": name_prefix,
        "spec": {k: v for k, v in spec.items() if v is not None},
    }


def _submit(ctx: typer.Context, name: str, framework: str, workers: int, **flags: Any) -> None:
    c = client()
    project = flags.pop("project") or c.project
    block = compute(
        flags.pop("gpu"), flags.pop("gpu_memory"), flags.pop("cpu"), flags.pop("memory")
    )
    body = workload_body(
        name, framework, workers, list(ctx.args), project=project, compute_block=block, **flags
    )
    accepted = c.submit_distributed(body)
    console.print(
        f"The workload '{accepted['name']}' has been submitted successfully "
        f"(id {accepted['workloadId']}, project {project or 'default'})"
    )


@submit_dist.command("pytorch", context_settings=EXTRA)
@reports_errors
def submit_pytorch(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Workload name (DNS-1123: lowercase, digits, '-')."),
    workers: int = typer.Option(..., "--workers", help="Worker pods besides the master."),
    gpu: float = typer.Option(
        None, "-g", "--gpu", help="GPUs per pod; below 1 is a portion of one device."
    ),
    gpu_memory: str = typer.Option(None, "--gpu-memory", help="GPU memory per pod, e.g. 4G."),
    cpu: float = typer.Option(None, "--cpu", help="CPU cores per pod."),
    memory: str = typer.Option(None, "--memory", help="CPU memory per pod, e.g. 1G."),
    env: list[str] = typer.Option(
        [], "-e", "--environment", help="KEY=VALUE for every pod (repeatable)."
    ),
    working_dir: str = typer.Option(
        None, "--working-dir", help="Where the command runs (default: here)."
    ),
    backoff_limit: int = typer.Option(
        None, "--backoff-limit", help="Gang restarts after failures (default 6)."
    ),
    clean_pod_policy: str = typer.Option(
        None, "--clean-pod-policy", help="Running (default), All or None."
    ),
    interactive: bool = typer.Option(False, "--interactive", help="Keep pods for `bash`/`exec`."),
    image: str = typer.Option(
        None, "-i", "--image", help="Container image (recorded; see README)."
    ),
    project: str = typer.Option(
        None, "-p", "--project", help="Project (default: the current one)."
    ),
    name_prefix: bool = typer.Option(
        False, "--name-prefix", help="Use NAME as a prefix; a suffix makes it unique."
    ),
) -> None:
    """Submit a PyTorch workload: 1 master + N workers; what follows -- is the command.

    Example:

      ringleader submit-dist pytorch mnist --workers 2 -- python -m ringleader.examples.digits
    """
    _submit(
        ctx,
        name,
        "PyTorch",
        workers,
        gpu=gpu,
        gpu_memory=gpu_memory,
        cpu=cpu,
        memory=memory,
        env=env,
        working_dir=working_dir,
        backoff_limit=backoff_limit,
        clean_pod_policy=clean_pod_policy,
        interactive=interactive,
        image=image,
        project=project,
        name_prefix=name_prefix,
    )


def submit_mpi_options(
    ctx: typer.Context, name: str, workers: int, slots_per_worker: int | None, **flags: Any
) -> None:
    _submit(ctx, name, "MPI", workers, slots_per_worker=slots_per_worker, **flags)


@submit_dist.command("mpi", context_settings=EXTRA)
@reports_errors
def submit_mpi_dist(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Workload name."),
    workers: int = typer.Option(
        ..., "--workers", help="Worker pods (ranks come from them; a launcher runs mpirun)."
    ),
    slots_per_worker: int = typer.Option(
        None, "--slots-per-worker", help="MPI ranks per worker pod (default 1)."
    ),
    gpu: float = typer.Option(None, "-g", "--gpu"),
    gpu_memory: str = typer.Option(None, "--gpu-memory"),
    cpu: float = typer.Option(None, "--cpu"),
    memory: str = typer.Option(None, "--memory"),
    env: list[str] = typer.Option([], "-e", "--environment"),
    working_dir: str = typer.Option(None, "--working-dir"),
    backoff_limit: int = typer.Option(None, "--backoff-limit"),
    clean_pod_policy: str = typer.Option(None, "--clean-pod-policy"),
    interactive: bool = typer.Option(False, "--interactive"),
    image: str = typer.Option(None, "-i", "--image"),
    project: str = typer.Option(None, "-p", "--project"),
    name_prefix: bool = typer.Option(False, "--name-prefix"),
) -> None:
    """Submit an MPI workload (Horovod, mpi4py): a launcher runs mpirun over N workers.

    Example: ringleader submit-dist mpi dist --workers 2 -- python -m mpi4py.bench helloworld
    """
    submit_mpi_options(
        ctx,
        name,
        workers,
        slots_per_worker,
        gpu=gpu,
        gpu_memory=gpu_memory,
        cpu=cpu,
        memory=memory,
        env=env,
        working_dir=working_dir,
        backoff_limit=backoff_limit,
        clean_pod_policy=clean_pod_policy,
        interactive=interactive,
        image=image,
        project=project,
        name_prefix=name_prefix,
    )


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
    rows = c.list_workloads(filters, limit=500)["workloads"]
    reasons = any(w.get("pendingReason") for w in rows)
    if reasons:  # why the scheduler left some Pending, after Run:ai's columns
        table.add_column("PENDING REASON", overflow="fold")
    for w in rows:
        cells = [
            w["name"],
            f"[{_phase_style(w['actualPhase'])}]{w['actualPhase']}[/]",
            age(w["createdAt"]),
            ", ".join(w.get("nodes") or []) or "-",
            w["image"] or "-",
            f"{w['framework']} distributed",
            w["projectName"],
            w["createdBy"] or "-",
            f"{w['allocatedGpus']:g} ({w['requestedGpus']:g})",
            f"{w['runningPods']} ({w['pendingPods']})",
        ]
        table.add_row(*cells, *([w.get("pendingReason") or ""] if reasons else []))
    console.print(table)


def gpu_text(gpus: list[dict]) -> str:
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
    spec = w["spec"]["spec"]
    console.print(f"[bold]Name:[/bold] {w['name']}   [bold]Id:[/bold] {w['workloadId']}")
    console.print(
        f"Project: {w['projectName']}   Type: {w['framework']} distributed   User: {w['createdBy']}"
    )
    reason = (
        f" ({w['phaseReason']}: {w['phaseMessage']})"
        if w["phaseMessage"]
        else (f" ({w['phaseReason']})" if w["phaseReason"] else "")
    )
    console.print(
        f"Status: {w['actualPhase']}{reason}   Desired: {w['desiredPhase']}   "
        f"Attempt: {w['attempt']}"
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
        f"GPUs: {w['allocatedGpus']:g} allocated of {w['requestedGpus']:g} requested"
        + (f"   Nodes: {', '.join(w['nodes'])}" if w.get("nodes") else "")
    )
    pods = Table(
        "POD", "ROLE", "STATUS", "NODE", "GPUs", "EXIT CODE", "ATTEMPT", "RANKS",
        box=None, title="Pods",
    )  # fmt: skip
    for p in c.pods(w["workloadId"]):
        pods.add_row(
            p["name"],
            p["role"],
            p["status"],
            p["node"] or "-",
            gpu_text(p.get("gpus") or []),
            "-" if p["exitCode"] is None else str(p["exitCode"]),
            str(p["attempt"]),
            ",".join(map(str, p["ranks"])) or "-",
        )
    console.print(pods)
    events = Table(
        "TIME", "TYPE", "POD", "FROM", "TO", "REASON", "MESSAGE", box=None, title="Events"
    )
    for e in c.events(w["workloadId"]):
        events.add_row(
            e["time"][11:19],
            e["type"],
            e.get("podName") or "",
            e.get("fromPhase") or "",
            e.get("toPhase") or "",
            e["reason"],
            e["message"][:120],
        )
    console.print(events)


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
        w["workloadId"], pod=pod, tail=tail, since=since, follow=follow, timestamps=timestamps
    ):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _action(verb: str, done: str):  # builds one Typer command per verb
    @reports_errors
    def command(
        name: str = typer.Argument(..., help="Workload name or id."),
        project: str = typer.Option(None, "-p", "--project"),
    ) -> None:
        c = client()
        w = c.find(name, project)
        c.action(w["workloadId"], verb)
        console.print(f"The workload '{w['name']}' {done}")

    command.__doc__ = f"{verb.capitalize()} a workload.\n\nExample: ringleader {verb} mnist"
    return command


delete = _action("delete", "is being deleted")
suspend = _action("suspend", "is being suspended")
resume = _action("resume", "is being resumed")


@reports_errors
def submit_mpi(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Workload name."),
    processes: int = typer.Option(..., "--processes", help="Worker processes (pods)."),
    gpu: float = typer.Option(None, "-g", "--gpu"),
    cpu: float = typer.Option(None, "--cpu"),
    memory: str = typer.Option(None, "--memory"),
    env: list[str] = typer.Option([], "-e", "--environment"),
    working_dir: str = typer.Option(None, "--working-dir"),
    backoff_limit: int = typer.Option(None, "--backoff-limit"),
    interactive: bool = typer.Option(False, "--interactive"),
    image: str = typer.Option(None, "-i", "--image"),
    project: str = typer.Option(None, "-p", "--project"),
) -> None:
    """Submit an MPI workload (old Run:ai verb; same as `submit-dist mpi --workers`).

    Example: ringleader submit-mpi dist --processes 2 -- python -m mpi4py.bench helloworld
    """
    submit_mpi_options(
        ctx,
        name,
        processes,
        None,
        gpu=gpu,
        gpu_memory=None,
        cpu=cpu,
        memory=memory,
        env=env,
        working_dir=working_dir,
        backoff_limit=backoff_limit,
        clean_pod_policy=None,
        interactive=interactive,
        image=image,
        project=project,
        name_prefix=False,
    )

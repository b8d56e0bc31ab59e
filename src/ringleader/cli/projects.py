"""project create|list|set, and Run:ai's ``config project NAME``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.table import Table

from ringleader.cli.common import client, console, reports_errors
from ringleader.connection import write_config
from ringleader.errors import InvalidSpec
from ringleader.spec_limits import parse_quantity

if TYPE_CHECKING:
    from ringleader.server.schemas import NodePoolResources

project_app = typer.Typer(
    help="Projects: create (with quotas), list, members, set the current one.\n\n"
    "Examples:\n\n  ringleader project create team-a --gpu 2\n\n  ringleader project set team-a",
    no_args_is_help=True,
)
config_app = typer.Typer(
    help="Set CLI defaults (Run:ai's `config project NAME`).\n\n"
    "Example: ringleader config project team-a",
    no_args_is_help=True,
)


def _quota(
    gpu: float | None,
    gpu_limit: float | None,
    cpu: float | None,
    cpu_limit: float | None,
    weight: float,
    memory: str | None = None,
    memory_limit: str | None = None,
    pool: str = "default",
) -> list[NodePoolResources]:
    """One node pool's quotas, in the projects API's shape (memory in MB)."""
    from ringleader.server.schemas import NodePoolResources, Quota

    def mb(text: str | None, flag: str) -> float | None:
        if text is None:
            return None
        try:
            return parse_quantity(text) / 10**6
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=flag) from None

    def quota(deserved: float | None, limit: float | None, flag: str) -> Quota:
        try:
            return Quota(deserved=deserved or 0, limit=limit, over_quota_weight=weight)
        except ValueError as exc:  # pydantic's: a negative or infinite number
            raise InvalidSpec(_first_problem(exc), flag) from None

    entry = NodePoolResources(
        node_pool=pool,
        gpu=quota(gpu, gpu_limit, "--gpu"),
        cpu=quota(cpu, cpu_limit, "--cpu"),
        memory=quota(mb(memory, "--memory"), mb(memory_limit, "--memory-limit"), "--memory"),
    )
    return [entry]


def _first_problem(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors) and errors():
        first = errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        return f"{field}: {first['msg']}" if field else str(first["msg"])
    return str(exc)


@project_app.command("create")
@reports_errors
def project_create(
    name: str = typer.Argument(..., metavar="NAME", help="Project name (DNS-1123)."),
    gpu: float = typer.Option(None, "--gpu", metavar="GPUS", help="Deserved GPUs (quota)."),
    gpu_limit: float = typer.Option(
        None, "--gpu-limit", metavar="GPUS", help="Never more than this many GPUs."
    ),
    cpu: float = typer.Option(None, "--cpu", metavar="CORES", help="Deserved CPU cores."),
    cpu_limit: float = typer.Option(
        None, "--cpu-limit", metavar="CORES", help="Never more than this many CPU cores."
    ),
    over_quota_weight: float = typer.Option(
        1, "--over-quota-weight", metavar="W", help="Share of unused capacity."
    ),
    memory: str = typer.Option(
        None, "--memory", metavar="SIZE", help="Deserved CPU memory, e.g. 64G."
    ),
    memory_limit: str = typer.Option(
        None, "--memory-limit", metavar="SIZE", help="Never more memory than this."
    ),
    pool: str = typer.Option(
        "default", "--node-pool", metavar="POOL", help="Node pool these quotas are for."
    ),
) -> None:
    """Create a project with quotas (for one node pool; the API takes several).

    A project created without any quota is not limited by quota. CPU and
    memory quotas are off unless given.

    Examples:

      ringleader project create team-a --gpu 2 --gpu-limit 4

      ringleader project create team-b --gpu 1 --over-quota-weight 3

      ringleader project create team-c --gpu 1 --cpu 16 --memory 64G
    """
    quotas = (gpu, gpu_limit, cpu, cpu_limit, memory, memory_limit)
    resources = (
        _quota(gpu, gpu_limit, cpu, cpu_limit, over_quota_weight, memory, memory_limit, pool)
        if any(v is not None for v in quotas) or over_quota_weight != 1
        else []
    )
    from ringleader.server.schemas import ProjectIn

    try:
        body = ProjectIn(name=name, resources=resources)
    except ValueError as exc:  # the name (DNS-1123)
        raise InvalidSpec(_first_problem(exc).removeprefix("name: "), "NAME") from None
    p = client().create_project(body)
    console.print(f"Project '{p.name}' created (id {p.id})")


@project_app.command("list")
@reports_errors
def project_list() -> None:
    """List projects with their quotas.

    Example: ringleader project list
    """
    c = client()
    table = Table(
        "PROJECT", "ID", "NODE POOL", "GPU DESERVED", "GPU LIMIT", "OVER-QUOTA WEIGHT",
        "CPU DESERVED", "CURRENT", box=None,
    )  # fmt: skip
    for p in c.projects():
        current = "*" if p.name == (c.project or "default") else ""
        if not p.resources:
            table.add_row(p.name, p.id, "all", "no quota", "-", "-", "-", current)
        for pool in p.resources:
            limit = pool.get("gpu", {}).get("limit")
            table.add_row(
                p.name,
                p.id,
                pool.get("nodePool", "default"),
                f"{pool.get('gpu', {}).get('deserved', 0):g}",
                "-" if limit is None else f"{limit:g}",
                f"{pool.get('gpu', {}).get('overQuotaWeight', 1):g}",
                f"{pool.get('cpu', {}).get('deserved', 0):g}",
                current,
            )
    console.print(table)


@project_app.command("set")
@reports_errors
def project_set(
    name: str = typer.Argument(..., metavar="NAME", help="Project to use by default."),
) -> None:
    """Make NAME the current project for later commands.

    Example: ringleader project set team-a
    """
    if not name:
        raise InvalidSpec("a project name is required", "NAME")
    client().get_project(name)  # 404 if it does not exist or is not yours
    write_config({"project": name})
    console.print(f"Project '{name}' has been set as the default project")


config_app.command(
    "project", help="Same as `project set NAME`.\n\nExample: ringleader config project team-a"
)(project_set)


@project_app.command("members")
@reports_errors
def project_members(
    name: str = typer.Argument(..., metavar="NAME", help="Project name or id."),
) -> None:
    """List a project's members and their roles.

    Change them with `ringleader user assign USER PROJECT --role ROLE` (project admins).

    Example: ringleader project members team-a
    """
    table = Table("USER", "ID", "ROLE", box=None)
    for m in client().members(name):
        table.add_row(m.username, m.user_id, m.role)
    console.print(table)

"""``ringleader environment ...`` (and what ``ringleader compute ...`` shares): Run:ai's
workload assets.

An environment (image, command, args, variables, working directory) and a
compute resource (GPUs, CPU, memory per pod) are made once, in a project or
for every project, and named at submit (``--environment-asset NAME``,
``--compute NAME``; ``cli/submit_options.with_assets``). Each command builds
the API's request body here, with the server's own models, so bad input
names the flag before anything is sent. The compute commands are in
``cli/compute_assets.py``; the helpers both use are here.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from ringleader.cli.common import age, client, console, reports_errors
from ringleader.errors import InvalidSpec, NotFound

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from ringleader.client import Client
    from ringleader.server.asset_schemas import EnvironmentAsset

ENVIRONMENT_HELP = (
    "Environment assets: image, command, variables; named at submit (--environment-asset)."
)
environment_app = typer.Typer(
    help=f"{ENVIRONMENT_HELP}\n\nExample: ringleader environment create pytorch-dt"
    " -i kubeflow/pytorch-dist-mnist:latest",
    no_args_is_help=True,
)

SCOPES = ("project", "tenant")
OUTPUTS = ("table", "json", "yaml")
# The API field a validation error names -> the flag that set it.
ENVIRONMENT_FLAGS = {
    "name": "NAME",
    "description": "--description",
    "scope": "--scope",
    "projectId": "-p/--project",
    "image": "-i/--image",
    "command": "--command",
    "args": "--args",
    "workingDir": "--working-dir",
    "environmentVariables": "-e/--environment",
    "imagePullPolicy": "--image-pull-policy",
}

PROJECT_OPTION = typer.Option(
    None,
    "-p",
    "--project",
    metavar="PROJECT",
    help="Project (default: the current one). Example: -p team-a",
)
SCOPE_OPTION = typer.Option(
    "project",
    "--scope",
    metavar="SCOPE",
    help="project: the project's members see it; tenant: every project does (admins only).",
)
OUTPUT_OPTION = typer.Option(
    "table", "-o", "--output", metavar="FORMAT", help="table, json or yaml."
)


def build_request(model: type[BaseModel], body: dict[str, Any], flags: dict[str, str]) -> Any:
    """``body`` as ``model``; a bad value is an InvalidSpec naming the flag that set it."""
    from pydantic import ValidationError

    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise flag_error(exc, flags) from None


def flag_error(exc: ValidationError, flags: dict[str, str]) -> InvalidSpec:
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]  # ["spec", "environmentVariables", "0", "name"]
    field = loc[1] if len(loc) > 1 else loc[0] if loc else ""
    flag = flags.get(field, ".".join(loc))
    return InvalidSpec(error["msg"].removeprefix("Value error, "), flag)


def meta_fields(
    name: str, scope: str, project: str | None, description: str | None, c: Client
) -> dict[str, Any]:
    if scope not in SCOPES:
        raise InvalidSpec(f"choose {' or '.join(SCOPES)}, not {scope!r}", "--scope")
    meta: dict[str, Any] = {"name": name, "scope": scope}
    if scope == "project":
        meta["projectId"] = project or c.project or "default"
    elif project:
        raise InvalidSpec("a tenant asset belongs to no project; drop -p", "-p/--project")
    if description is not None:
        meta["description"] = description
    return meta


def _variables(pairs: list[str]) -> list[dict[str, str]]:
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidSpec(f"expected KEY=VALUE, got {pair!r}", "-e/--environment")
        out.append({"name": key, "value": value})
    return out


def where_text(meta: Any) -> str:
    return f"project {meta.project_name}" if meta.project_name else "every project"


def print_assets(items: Any, output: str, table: Callable[[], Table]) -> None:
    """``items`` (a model or a list of them) as JSON/YAML, or ``table()``."""
    if output not in OUTPUTS:
        raise InvalidSpec(f"choose {', '.join(OUTPUTS)}, not {output!r}", "-o/--output")
    if output == "table":
        console.print(table())
        return
    many = isinstance(items, list)
    data = [i.model_dump(mode="json", by_alias=True) for i in (items if many else [items])]
    document: Any = data if many else data[0]
    if output == "json":
        print(json.dumps(document, indent=2))
    else:
        import yaml

        print(yaml.safe_dump(document, sort_keys=False), end="")


def find_one(
    c: Client,
    find: Callable[[str, str | None], Any],
    by_id: Callable[[str], Any],
    name: str,
    project: str | None,
) -> Any:
    """The asset ``name`` (the project's before everyone's), or the one with that id."""
    try:
        return find(name, project)
    except NotFound:
        try:
            return by_id(name)
        except NotFound:
            pass
        raise


# ----- environment -----------------------------------------------------------------


@environment_app.command("create")
@reports_errors
def environment_create(
    name: str = typer.Argument(
        ..., metavar="NAME", help="Asset name (DNS-1123: lowercase, digits, '-')."
    ),
    image: str = typer.Option(
        None, "-i", "--image", metavar="IMAGE", help="Container image, e.g. repo/img:tag."
    ),
    command: str = typer.Option(
        None,
        "--command",
        metavar="COMMAND",
        help='What runs, split like a shell does, e.g. "python train.py".',
    ),
    args: list[str] = typer.Option(
        [],
        "--args",
        metavar="ARG",
        help="Arguments after the command (repeatable), e.g. --args=--epochs=1.",
    ),
    env: list[str] = typer.Option(
        [],
        "-e",
        "--environment",
        metavar="KEY=VALUE",
        help="A variable (repeatable), e.g. -e EPOCHS=3.",
    ),
    working_dir: str = typer.Option(
        None, "--working-dir", metavar="DIR", help="Where the command runs."
    ),
    image_pull_policy: str = typer.Option(
        None,
        "--image-pull-policy",
        metavar="POLICY",
        help="Always, Never or IfNotPresent (recorded).",
    ),
    description: str = typer.Option(
        None, "--description", metavar="TEXT", help="One line about it."
    ),
    project: str = PROJECT_OPTION,
    scope: str = SCOPE_OPTION,
) -> None:
    """Create an environment asset to name at submit (seed 002's "+NEW ENVIRONMENT").

    Examples:

      ringleader environment create pytorch-dt -i kubeflow/pytorch-dist-mnist:latest

      ringleader environment create digits --command "python train.py" -e EPOCHS=3
    """
    from ringleader.server.asset_schemas import EnvironmentCreationRequest

    c = client()
    spec: dict[str, Any] = {
        "image": image,
        "command": command,
        "args": shlex.join(args) if args else None,
        "workingDir": working_dir,
        "environmentVariables": _variables(env),
        "imagePullPolicy": image_pull_policy,
    }
    body = {
        "meta": meta_fields(name, scope, project, description, c),
        "spec": {key: value for key, value in spec.items() if value is not None},
    }
    made = c.create_environment(build_request(EnvironmentCreationRequest, body, ENVIRONMENT_FLAGS))
    console.print(
        f"Environment '{made.meta.name}' created for {where_text(made.meta)} (id {made.meta.id}).\n"
        f"Use it: ringleader submit-dist pytorch NAME --workers 2 "
        f"--environment-asset {made.meta.name}"
    )


def _environment_table(entries: list[EnvironmentAsset]) -> Table:
    table = Table("NAME", "SCOPE", "PROJECT", "IMAGE", "COMMAND", "AGE", box=None)
    table.columns[0].no_wrap = True
    for column in table.columns[3:5]:  # wrapped whole at 80 columns, never cut
        column.overflow = "fold"
    for e in entries:
        command = " ".join(part for part in (e.spec.command, e.spec.args) if part)
        table.add_row(
            e.meta.name,
            e.meta.scope,
            e.meta.project_name or "-",
            e.spec.image or "-",
            (command[:60] + "...") if len(command) > 60 else command or "-",
            age(e.meta.created_at),
        )
    return table


@environment_app.command("list")
@reports_errors
def environment_list(
    project: str = PROJECT_OPTION,
    all_projects: bool = typer.Option(
        False, "-A", "--all", help="Every project's you can see, not one project's."
    ),
    output: str = OUTPUT_OPTION,
) -> None:
    """List the environments a project can use: its own and every project's.

    Example: ringleader environment list -A
    """
    c = client()
    entries = c.environments(None if all_projects else (project or c.project or "default"))
    print_assets(entries, output, lambda: _environment_table(entries))


@environment_app.command("describe")
@reports_errors
def environment_describe(
    name: str = typer.Argument(..., metavar="NAME", help="Asset name (or id)."),
    project: str = PROJECT_OPTION,
    output: str = OUTPUT_OPTION,
) -> None:
    """Show an environment asset: its image, command, variables and who made it.

    Example: ringleader environment describe pytorch-dt
    """
    c = client()
    e = find_one(c, c.find_environment, c.environment, name, project)

    def table() -> Table:
        from ringleader.server.asset_schemas import IGNORED_ENVIRONMENT_FIELDS

        rows = Table(box=None, show_header=False)
        rows.add_row("Name", e.meta.name)
        rows.add_row("Id", e.meta.id)
        rows.add_row("Scope", e.meta.scope)
        rows.add_row("Project", e.meta.project_name or "- (every project sees it)")
        rows.add_row("Description", e.meta.description or "-")
        rows.add_row("Image", e.spec.image or "-")
        rows.add_row("Command", e.spec.command or "-")
        rows.add_row("Args", e.spec.args or "-")
        rows.add_row("Working dir", e.spec.working_dir or "-")
        for v in e.spec.environment_variables:
            excluded = " (excluded)" if v.exclude else ""
            rows.add_row("Variable", f"{v.name}={v.value or ''}{excluded}")
        stored = e.spec.model_dump(by_alias=True, exclude_none=True)
        ignored = [field for field in IGNORED_ENVIRONMENT_FIELDS if field in stored]
        if ignored:
            rows.add_row("Recorded only", ", ".join(ignored) + " (not applied by ringleader)")
        rows.add_row("Created", f"{age(e.meta.created_at)} ago by {e.meta.created_by}")
        return rows

    print_assets(e, output, table)


@environment_app.command("delete")
@reports_errors
def environment_delete(
    name: str = typer.Argument(..., metavar="NAME", help="Asset name (or id)."),
    project: str = PROJECT_OPTION,
) -> None:
    """Delete an environment asset (workloads submitted with it keep their values).

    Example: ringleader environment delete pytorch-dt
    """
    c = client()
    e = find_one(c, c.find_environment, c.environment, name, project)
    c.delete_environment(e.meta.id)
    console.print(f"Environment '{e.meta.name}' deleted from {where_text(e.meta)}")

"""``ringleader environment ...``: Run:ai's workload assets.

An environment (image, command, args, variables, working directory) and a
compute resource (GPUs, CPU, memory per pod) are made once, in a project or
for every project, and named at submit (``--environment-asset NAME``,
``--compute NAME``; ``cli/submit_assets.with_assets``). Each command builds
the API's request body here, with the server's own models, so bad input
names the flag before anything is sent. The compute commands are in
``cli/compute_assets.py``; what both share is in ``cli/asset_common.py``.
"""

from __future__ import annotations

import shlex
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
    from ringleader.server.asset_schemas import EnvironmentAsset

ENVIRONMENT_HELP = (
    "Environment assets: image, command, variables; named at submit (--environment-asset)."
)
environment_app = typer.Typer(
    help=f"{ENVIRONMENT_HELP}\n\nExample:\n\n  ringleader environment create pytorch-dt"
    " -i kubeflow/pytorch-dist-mnist:latest",
    no_args_is_help=True,
)

# The API field a validation error names -> the flag that set it.
ENVIRONMENT_FLAGS = {
    **META_FLAGS,
    "image": "-i/--image",
    "command": "--command",
    "args": "--args",
    "workingDir": "--working-dir",
    "environmentVariables": "-e/--environment",
    "imagePullPolicy": "--image-pull-policy",
}


def _variables(pairs: list[str]) -> list[dict[str, str]]:
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidSpec(f"expected KEY=VALUE, got {pair!r}", "-e/--environment")
        out.append({"name": key, "value": value})
    return out


# ----- environment -----------------------------------------------------------------


@environment_app.command("create")
@reports_errors
def environment_create(
    name: str = NEW_NAME_ARGUMENT,
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
    description: str = DESCRIPTION_OPTION,
    project: str = PROJECT_OPTION,
    scope: str = SCOPE_OPTION,
) -> None:
    """Create an environment asset to name at submit (Run:ai's "+NEW ENVIRONMENT").

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
    body = create_body(name, scope, project, description, c, spec)
    made = c.create_environment(build_request(EnvironmentCreationRequest, body, ENVIRONMENT_FLAGS))
    console.print(
        f"Environment '{made.meta.name}' created for {where_text(made.meta)} (id {made.meta.id}).\n"
        f"Use it: ringleader submit-dist pytorch NAME --workers 2 "
        f"--environment-asset {made.meta.name}"
    )


def _environment_table(entries: list[EnvironmentAsset]) -> Table:
    table = asset_table("IMAGE", "COMMAND")
    for column in table.columns[3:5]:  # wrapped whole at 80 columns, never cut
        column.overflow = "fold"
    for e in entries:
        command = " ".join(part for part in (e.spec.command, e.spec.args) if part)
        shown = (command[:60] + "...") if len(command) > 60 else command or "-"
        table.add_row(*asset_row(e.meta, e.spec.image or "-", shown))
    return table


def _environment_rows(e: EnvironmentAsset) -> list[tuple[str, str]]:
    from ringleader.server.asset_schemas import IGNORED_ENVIRONMENT_FIELDS

    rows = [
        ("Image", e.spec.image or "-"),
        ("Command", e.spec.command or "-"),
        ("Args", e.spec.args or "-"),
        ("Working dir", e.spec.working_dir or "-"),
    ]
    for v in e.spec.environment_variables:
        excluded = " (excluded)" if v.exclude else ""
        rows.append(("Variable", f"{v.name}={v.value or ''}{excluded}"))
    stored = e.spec.model_dump(by_alias=True, exclude_none=True)
    ignored = [field for field in IGNORED_ENVIRONMENT_FIELDS if field in stored]
    if ignored:
        rows.append(("Recorded only", ", ".join(ignored) + " (not applied by ringleader)"))
    return rows


ENVIRONMENT = AssetKind(
    label="Environment",
    list_method="environments",
    get_method="environment",
    find_method="find_environment",
    delete_method="delete_environment",
    table=_environment_table,
    rows=_environment_rows,
)
add_read_commands(
    environment_app,
    ENVIRONMENT,
    list_help="""List the environments a project can use: its own and every project's.

    Example: ringleader environment list -A
    """,
    describe_help="""Show an environment asset: its image, command, variables and who made it.

    Example: ringleader environment describe pytorch-dt
    """,
    delete_help="""Delete an environment asset (workloads submitted with it keep their values).

    Example: ringleader environment delete pytorch-dt
    """,
)

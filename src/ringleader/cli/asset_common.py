"""What ``ringleader environment ...`` and ``ringleader compute ...`` share: their
options, the request body each ``create`` builds (with the server's own models, so
bad input names the flag before anything is sent), and the bodies of ``list``,
``describe`` and ``delete``, which differ between the two only in the client calls
and the columns/rows of the table. One place, so the two asset kinds cannot drift."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from ringleader.cli.common import age, client, console, reports_errors
from ringleader.errors import InvalidSpec, NotFound

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from ringleader.client import Client

SCOPES = ("project", "tenant")
OUTPUTS = ("table", "json", "yaml")

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
NEW_NAME_ARGUMENT = typer.Argument(
    ..., metavar="NAME", help="Asset name (DNS-1123: lowercase, digits, '-')."
)
DESCRIPTION_OPTION = typer.Option(None, "--description", metavar="TEXT", help="One line about it.")
#: The API's meta fields a validation error names -> the flag that set it (create).
META_FLAGS = {
    "name": "NAME",
    "description": "--description",
    "scope": "--scope",
    "projectId": "-p/--project",
}
ALL_PROJECTS_OPTION = typer.Option(
    False, "-A", "--all", help="Every project's you can see, not one project's."
)
NAME_OR_ID_ARGUMENT = typer.Argument(..., metavar="NAME", help="Asset name (or id).")


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


def create_body(
    name: str,
    scope: str,
    project: str | None,
    description: str | None,
    c: Client,
    spec: dict[str, Any],
) -> dict[str, Any]:
    """A create request's body: the meta block and the spec fields that were given."""
    return {
        "meta": meta_fields(name, scope, project, description, c),
        "spec": {key: value for key, value in spec.items() if value is not None},
    }


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


def list_project(c: Client, project: str | None, all_projects: bool) -> str | None:
    """Which project's assets ``list`` asks for: None for every project's (``-A``)."""
    return None if all_projects else (project or c.project or "default")


def asset_table(*columns: str) -> Table:
    """A list table: NAME, SCOPE, PROJECT, then ``columns``, then AGE."""
    table = Table("NAME", "SCOPE", "PROJECT", *columns, "AGE", box=None)
    table.columns[0].no_wrap = True
    return table


def asset_row(meta: Any, *cells: str) -> list[str]:
    """One list row: the meta block's cells around this kind's ``cells``."""
    return [meta.name, meta.scope, meta.project_name or "-", *cells, age(meta.created_at)]


def describe_table(meta: Any, rows: list[tuple[str, str]]) -> Table:
    """``describe``'s table: who/where the asset is, this kind's ``rows``, when made."""
    table = Table(box=None, show_header=False)
    table.add_row("Name", meta.name)
    table.add_row("Id", meta.id)
    table.add_row("Scope", meta.scope)
    table.add_row("Project", meta.project_name or "- (every project sees it)")
    table.add_row("Description", meta.description or "-")
    for label, value in rows:
        table.add_row(label, value)
    table.add_row("Created", f"{age(meta.created_at)} ago by {meta.created_by}")
    return table


@dataclass(frozen=True)
class AssetKind:
    """One kind of asset as its ``list``, ``describe`` and ``delete`` commands see it:
    what it is called, the client methods for it, and how its tables look."""

    label: str  # "Environment", "Compute resource": the start of what delete says
    list_method: str  # Client method names: list, get by id, find by name, delete
    get_method: str
    find_method: str
    delete_method: str
    table: Callable[[list[Any]], Table]  # list's table
    rows: Callable[[Any], list[tuple[str, str]]]  # describe's rows of this kind


def add_read_commands(
    app: typer.Typer, kind: AssetKind, *, list_help: str, describe_help: str, delete_help: str
) -> None:
    """Add ``list``, ``describe`` and ``delete`` for ``kind`` to ``app``, in that order."""

    def found(c: Client, name: str, project: str | None) -> Any:
        find, by_id = getattr(c, kind.find_method), getattr(c, kind.get_method)
        return find_one(c, find, by_id, name, project)

    @app.command("list", help=list_help)
    @reports_errors
    def list_assets(
        project: str = PROJECT_OPTION,
        all_projects: bool = ALL_PROJECTS_OPTION,
        output: str = OUTPUT_OPTION,
    ) -> None:
        c = client()
        entries = getattr(c, kind.list_method)(list_project(c, project, all_projects))
        print_assets(entries, output, lambda: kind.table(entries))

    @app.command("describe", help=describe_help)
    @reports_errors
    def describe_asset(
        name: str = NAME_OR_ID_ARGUMENT,
        project: str = PROJECT_OPTION,
        output: str = OUTPUT_OPTION,
    ) -> None:
        asset = found(client(), name, project)
        print_assets(asset, output, lambda: describe_table(asset.meta, kind.rows(asset)))

    @app.command("delete", help=delete_help)
    @reports_errors
    def delete_asset(name: str = NAME_OR_ID_ARGUMENT, project: str = PROJECT_OPTION) -> None:
        c = client()
        asset = found(c, name, project)
        getattr(c, kind.delete_method)(asset.meta.id)
        console.print(f"{kind.label} '{asset.meta.name}' deleted from {where_text(asset.meta)}")

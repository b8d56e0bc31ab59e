"""The docs site's reference pages, generated: every CLI command and flag from the
Typer app, every REST route and schema from the server's OpenAPI document.

Why generated and committed: a page written by hand drifts from the code the
day a flag is added; these are rebuilt by ``make docs`` and
``tests/docs/test_reference.py`` fails when the committed page differs from
what the code would write, so the reference is always the code's own.

``python -m ringleader.cli.docs_reference`` writes them; ``--check`` only
compares (exit 1 naming the stale page).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CLI_PAGE = Path("docs/reference/cli.md")
REST_PAGE = Path("docs/reference/rest.md")
_HTTP_METHODS = ("get", "post", "put", "patch", "delete")


def _cell(text: str) -> str:
    """Text safe in a markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _commands(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    """Every command under ``command``, depth first, in the order help lists them."""
    yield path, command
    ctx = command.context_class(command, info_name=path[-1])
    for name in getattr(command, "list_commands", lambda _ctx: [])(ctx):
        yield from _commands(command.get_command(ctx, name), [*path, name])


def _loaded_root() -> Any:
    """The root group with every lazily registered command loaded."""
    import typer

    from ringleader.cli.main import COMMANDS, typer_app

    root = typer.main.get_group(typer_app())
    for name, entry in COMMANDS.items():
        root.commands[name] = entry.load(name)
    return root


def _option_row(param: Any, ctx: Any) -> str:
    names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
    record = param.get_help_record(ctx)
    value = ""
    if record and " " in record[0].split(",")[-1].strip():
        value = "`" + record[0].split(",")[-1].strip().split(" ", 1)[1] + "`"
    helptext = _cell(getattr(param, "help", None) or "")
    default = param.default
    shown = ""
    if param.is_flag:
        pass
    elif getattr(param, "show_default", False) or (
        default not in (None, False, (), []) and not param.is_flag and not callable(default)
    ):
        shown = f" (default: `{_cell(str(default))}`)" if default not in (None, "", (), []) else ""
    return f"| {names} | {value} | {helptext}{shown} |"


def _help_markdown(text: str) -> list[str]:
    """A command's help as markdown: its indented example lines become console blocks
    (in help they are indented; in markdown they would run into one paragraph)."""
    out: list[str] = []
    block: list[str] = []
    for line in text.replace("\b\n", "").splitlines():
        if line.startswith("  ") and line.strip():
            block.append(line.strip())
            continue
        if block and not line.strip():
            continue  # a blank line between examples keeps the block open
        if block:
            out += ["```console", *block, "```", ""]
            block = []
        out.append(line)
    if block:
        out += ["```console", *block, "```"]
    return [*out, ""]


def _command_section(path: list[str], command: Any) -> list[str]:
    ctx = command.context_class(command, info_name=" ".join(path))
    usage = " ".join([" ".join(path), *command.collect_usage_pieces(ctx)])
    heading = "#" * min(len(path), 4)
    out = [f"{heading} `{' '.join(path)}`", ""]
    helptext = (command.help or "").strip()
    out += [f"```text\n{usage}\n```", ""]
    if helptext:
        out += _help_markdown(helptext)
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    options = [p for p in command.params if p.param_type_name == "option"]
    if arguments:
        out += ["| argument | help |", "|---|---|"]
        for arg in arguments:
            helptext = _cell(getattr(arg, "help", None) or "")
            out.append(f"| `{arg.metavar or arg.name.upper()}` | {helptext} |")
        out.append("")
    if options:
        out += ["| option | value | help |", "|---|---|---|"]
        out += [_option_row(opt, ctx) for opt in options]
        out.append("")
    sub = getattr(command, "list_commands", None)
    if sub:
        names = sub(ctx)
        if names:
            out += ["Commands: " + ", ".join(f"`{n}`" for n in names) + ".", ""]
    return out


def cli_markdown() -> str:
    """The CLI reference page."""
    lines = [
        "# CLI reference",
        "",
        "Every `ringleader` command and flag, generated from the CLI itself",
        "(`python -m ringleader.cli.docs_reference`; a test fails when this page is stale).",
        "`ringleader COMMAND --help` prints the same.",
        "",
    ]
    for path, command in _commands(_loaded_root(), ["ringleader"]):
        lines += _command_section(path, command)
    return "\n".join(lines).rstrip() + "\n"


def openapi_document() -> dict[str, Any]:
    """The document the server serves at /openapi.json (built without starting it)."""
    from ringleader.server.app import create_app
    from ringleader.server.config import ServerConfig

    return create_app(ServerConfig(data_dir=Path("/nonexistent"))).openapi()


def _schema_name(schema: dict[str, Any] | None) -> str:
    if not schema:
        return ""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#{name.lower()})"
    if schema.get("type") == "array":
        return f"array of {_schema_name(schema.get('items'))}"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(_schema_name(s) for s in schema[key])
    return f"`{schema.get('type', 'object')}`"


def _body(content: dict[str, Any] | None) -> str:
    for media in (content or {}).values():
        return _schema_name(media.get("schema"))
    return ""


def _operation(method: str, route: str, op: dict[str, Any]) -> list[str]:
    out = [f"### `{method.upper()} {route}`", ""]
    if op.get("summary"):
        out += [op["summary"] + ".", ""]
    if op.get("description"):
        out += [op["description"].strip(), ""]
    params = op.get("parameters", [])
    if params:
        out += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            out.append(
                f"| `{p['name']}` | {p['in']} | {_schema_name(p.get('schema'))} | "
                f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
            )
        out.append("")
    if "requestBody" in op:
        out += [f"Body: {_body(op['requestBody'].get('content'))}", ""]
    out += ["| status | meaning | body |", "|---|---|---|"]
    for code, answer in op.get("responses", {}).items():
        meaning = _cell(answer.get("description", ""))
        out.append(f"| {code} | {meaning} | {_body(answer.get('content'))} |")
    auth = "a bearer token" if op.get("security") else "no token"
    return [*out, "", f"Needs {auth}.", ""]


def _schema_section(name: str, schema: dict[str, Any]) -> list[str]:
    out = [f"### {name}", ""]
    if schema.get("description"):
        out += [_cell(schema["description"]), ""]
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    if props:
        out += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, spec in props.items():
            out.append(
                f"| `{field}` | {_schema_name(spec)} | {'yes' if field in required else 'no'} | "
                f"{_cell(spec.get('description', ''))} |"
            )
        out.append("")
    elif "enum" in schema:
        out += ["One of: " + ", ".join(f"`{v}`" for v in schema["enum"]) + ".", ""]
    return out


def rest_markdown(document: dict[str, Any] | None = None) -> str:
    """The REST reference page: routes by tag, then every schema."""
    doc = document or openapi_document()
    lines = [
        "# REST API reference",
        "",
        f"{doc['info']['title']} {doc['info']['version']}'s HTTP API, generated from its OpenAPI",
        "document (`python -m ringleader.cli.docs_reference`; a test fails when this page",
        "is stale). A running server serves the same document at `/openapi.json` and an",
        "interactive page at `/docs`, both to a caller with a bearer token",
        "(`ringleader token` prints one).",
        "",
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for route, item in doc["paths"].items():
        for method in _HTTP_METHODS:
            if method in item:
                tag = (item[method].get("tags") or ["other"])[0]
                by_tag.setdefault(tag, []).append((method, route, item[method]))
    for tag in sorted(by_tag):
        lines += [f"## {tag.capitalize()}", ""]
        for method, route, op in by_tag[tag]:
            lines += _operation(method, route, op)
    lines += ["## Schemas", ""]
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        lines += _schema_section(name, schema)
    return "\n".join(lines).rstrip() + "\n"


def pages() -> dict[Path, str]:
    """Each generated page and its text."""
    return {CLI_PAGE: cli_markdown(), REST_PAGE: rest_markdown()}


def main(argv: list[str] | None = None) -> int:
    """Write the pages (run from the repository root); ``--check`` only compares."""
    args = sys.argv[1:] if argv is None else argv
    check = args == ["--check"]
    if args and not check:
        print("usage: python -m ringleader.cli.docs_reference [--check]", file=sys.stderr)
        return 2
    stale = []
    for path, text in pages().items():
        if path.exists() and path.read_text() == text:
            continue
        if check:
            stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"stale: {', '.join(stale)} (make docs rewrites them)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

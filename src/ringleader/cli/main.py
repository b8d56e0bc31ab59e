"""The ``ringleader`` command: one Typer app, one module per command group.

Commands only parse and print; the work is done by library code
(``ringleader.launch`` now, the HTTP client later), so everything a command
does can also be done from Python.
"""

from __future__ import annotations

import typer

from ringleader import __version__
from ringleader.cli import launch as launch_cmd

app = typer.Typer(
    name="ringleader",
    help="Run distributed training: one command becomes a gang of ranks, here or over SSH.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command(
    "launch",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    help=launch_cmd.HELP,
)(launch_cmd.launch)


@app.command("version")
def version() -> None:
    """Print ringleader's version."""
    typer.echo(__version__)


if __name__ == "__main__":
    app()

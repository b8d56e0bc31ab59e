"""``ringleader workload-python``: make the Python a root server's workloads run with.

The work is ``ringleader.server.workload_python``; this module parses flags and
says what it did.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ringleader.cli.common import reports_errors
from ringleader.server import workload_python


@reports_errors
def make(
    directory: str = typer.Option(
        None,
        "--dir",
        metavar="DIR",
        help="Where to make it (default: /var/lib/ringleader/python, where a root server"
        " looks; RINGLEADER_WORKLOAD_PYTHON_DIR moves that default).",
    ),
    base: str = typer.Option(
        "/usr/bin/python3",
        "--base",
        metavar="PATH",
        help="The Python the venv is made from: one every account can run.",
    ),
    package: list[str] = typer.Option(
        None,
        "--package",
        metavar="SPEC",
        help="Another pip requirement to install (repeatable), e.g. --package mpi4py.",
    ),
    force: bool = typer.Option(False, "--force", help="Replace it if it exists."),
) -> None:
    """Make a Python every OS account can run, for a root server's workloads.

    A root server runs each user's workloads as that user's OS account, and those
    accounts often cannot run the server's own Python (a venv under /root). This
    makes a virtual environment of --base with ringleader and this server's
    versions of torch, numpy and scikit-learn, readable by all, and checks it as
    an unprivileged account. A root `ringleader server` started without
    --workload-python uses it when it cannot share its own.

    Examples:

      ringleader workload-python                     # as root

      ringleader workload-python --package mpi4py --force
    """
    target = Path(directory) if directory else workload_python.shared_dir()
    made = workload_python.make(
        target, base=base, extra=list(package or []), replace=force, echo=typer.echo
    )
    typer.echo(f"ready: {made.python} (Python {made.version}), checked as an unprivileged account")
    if directory and target.absolute() != workload_python.shared_dir().absolute():
        typer.echo(f"start the server with: ringleader server --workload-python {made.python}")
    else:
        typer.echo("a root `ringleader server` now runs workloads with it (no flag needed)")

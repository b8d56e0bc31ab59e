"""``ringleader horovodrun``: Horovod's command line (``launch/horovodrun.py``), also
installed as plain ``horovodrun``.  Every word after the verb is horovodrun's own,
``--help`` included."""

from __future__ import annotations

import typer

from ringleader.launch.horovodrun import main


def horovodrun(ctx: typer.Context) -> None:
    """Run a Horovod program as horovodrun does: -np N [-H a:2,b:2] COMMAND.

    Examples:

      ringleader horovodrun -np 2 python train.py

      ringleader horovodrun -np 4 -H a:2,b:2 python train.py
    """
    raise typer.Exit(main(ctx.args, prog="ringleader horovodrun"))

"""``ringleader launch``: start a gang of ranks and supervise it to the end.

The Typer command (help, errors) is built here from the options' one declaration,
``launch_args.LaunchArgs``; the work is ``ringleader.launch.command.run``, which the
entry point also calls directly for the common forms (see that module: launch must
start fast).
"""

from __future__ import annotations

import inspect
from typing import Any

import typer
from rich.markup import escape
from typer.core import TyperCommand

from ringleader.launch import frameworks
from ringleader.launch.command import LaunchArgs, parse_ranks, run
from ringleader.launch.launch_args import OPTION_FIELDS

SLURM_PANEL = "Slurm (with --slurm: the launch runs as an sbatch job)"
_TYPES: dict[str, Any] = {"int": int, "float": float, "str": str, "flag": bool, "list": list[str]}


def framework_help() -> str:
    """The registered frameworks, for ``--framework``'s help."""
    parts = [
        f"{f.name} ({'default; ' if f.name == frameworks.DEFAULT else ''}{f.summary})"
        for f in frameworks.all_frameworks()
    ]
    return (", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else parts[0]) + "."


class LaunchCommand(TyperCommand):
    """launch's usage line names the command it runs: ``[--] COMMAND [ARGS]...``."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[--] COMMAND [ARGS]..."]


def launch(ctx: typer.Context, **options: Any) -> None:
    """Start COMMAND as a gang of ranks, here or on SSH hosts, and supervise it.

    Launch's options come first; the command starts at its first word (or
    after --), and what follows is its own.

    Inside a Slurm allocation (salloc, an sbatch script) with no hosts given,
    ranks run on the allocation's nodes, one agent per node started with srun.

    Every rank gets torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR ...).
    If any rank fails, every rank everywhere is stopped and the first failure is
    summarised; the exit code is that rank's.

    With --slurm the same launch runs as a Slurm batch job on -N nodes: its
    output is followed here until it ends, the exit code is the job's, and
    Ctrl-C cancels the job.

    Examples:

      ringleader launch -n 2 -- python train.py

      ringleader launch --hostfile hosts.json -- python train.py

      ringleader launch --hostfile hostfile --nproc-per-node 2 -- python train.py

      ringleader launch -H a:2,b:2 --max-restarts 2 -- python train.py

      ringleader launch -n 4 --log-dir logs -- python train.py

      ringleader launch --framework mpi -n 3 -- python -m mpi4py.bench helloworld

      salloc -N 2 ringleader launch --nproc-per-node 2 -- python train.py

      ringleader launch --slurm -N 2 --time 1:00:00 -- python train.py

      ringleader launch --slurm -N 2 --nproc-per-node 2 -- python train.py
    """
    try:
        parse_ranks(options["ranks"])
    except ValueError:
        raise typer.BadParameter(
            f"expected rank numbers like 0,2; got {options['ranks']!r}", param_hint="--ranks"
        ) from None
    lists = {name: list(value) for name, value in options.items() if isinstance(value, tuple)}
    raise typer.Exit(run(LaunchArgs(command=list(ctx.args), **{**options, **lists})))


def _signature() -> inspect.Signature:
    """``launch``'s parameters as Typer reads them: ``ctx``, then one option per
    ``OPTION_FIELDS`` entry, in the order declared."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    ]
    for f in OPTION_FIELDS:
        meta = f.metadata
        extra: dict[str, Any] = {"metavar": meta["metavar"]} if meta["metavar"] else {}
        if meta["slurm"]:
            extra["rich_help_panel"] = SLURM_PANEL
        default = [] if meta["kind"] == "list" else f.default
        help_text = escape(meta["help"]) if meta["help"] else framework_help()
        declared = typer.Option(default, *meta["flags"], help=help_text, **extra)
        parameters.append(
            inspect.Parameter(f.name, keyword, default=declared, annotation=_TYPES[meta["kind"]])
        )
    return inspect.Signature(parameters)


launch.__signature__ = _signature()  # type: ignore[attr-defined]  # what Typer reads
launch.command_class = LaunchCommand  # type: ignore[attr-defined]  # cli/lazy_command.py

"""``ringleader launch``: start a gang of ranks and supervise it to the end.

The options are declared here, for Typer (help, errors); the work is
``ringleader.launch.command.run``, which the entry point also calls
directly for the common forms (see that module: launch must start fast).
"""

from __future__ import annotations

import typer
from typer.core import TyperCommand

from ringleader.launch import frameworks
from ringleader.launch.command import LaunchArgs, parse_ranks, run


def framework_help() -> str:
    """The registered frameworks, for ``--framework``'s help."""
    parts = [
        f"{f.name} ({'default; ' if f.name == frameworks.DEFAULT else ''}{f.summary})"
        for f in frameworks.all_frameworks()
    ]
    return (", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else parts[0]) + "."


SLURM_PANEL = "Slurm (with --slurm: the launch runs as an sbatch job)"


class LaunchCommand(TyperCommand):
    """launch's usage line names the command it runs: ``[--] COMMAND [ARGS]...``."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[--] COMMAND [ARGS]..."]


def launch(
    ctx: typer.Context,
    nproc: int = typer.Option(
        None,
        "-n",
        "--nproc",
        "--np",
        metavar="N",
        help="Total ranks (on this machine unless hosts are given).",
    ),
    hostfile: str = typer.Option(
        None, "--hostfile", metavar="FILE", help="MPI hostfile ('host slots=N') or MLX hosts.json."
    ),
    hosts: str = typer.Option(
        None, "-H", "--hosts", metavar="HOSTS", help="Hosts as 'a:2,b:2' (Horovod style)."
    ),
    nproc_per_node: int = typer.Option(
        None, "--nproc-per-node", metavar="N", help="Ranks per host (overrides slots)."
    ),
    framework: str = typer.Option(
        frameworks.DEFAULT, "--framework", metavar="NAME", help=framework_help()
    ),
    max_restarts: int = typer.Option(
        0,
        "--max-restarts",
        metavar="K",
        help="Restart the whole gang up to K times after a failure.",
    ),
    grace: float = typer.Option(
        5.0,
        "--grace",
        metavar="SECONDS",
        help="Seconds between SIGTERM and SIGKILL when stopping ranks.",
    ),
    network_interface: str = typer.Option(
        None, "--network-interface", metavar="IFACE", help="Interface for gloo/NCCL on every host."
    ),
    log_dir: str = typer.Option(
        None,
        "--log-dir",
        metavar="DIR",
        help="Keep per-attempt, per-rank stdout/stderr files here.",
    ),
    ranks: str = typer.Option(
        None, "--ranks", metavar="LIST", help="Show only these ranks on the console, e.g. 0,2."
    ),
    no_prefix: bool = typer.Option(
        False, "--no-prefix", help="Print rank lines without the \\[rank/world host] prefix."
    ),
    env: list[str] = typer.Option(
        [],
        "-e",
        "--env",
        metavar="KEY=VALUE",
        help="Extra environment for every rank, KEY=VALUE (repeatable).",
    ),
    run_id: str = typer.Option(
        None, "--run-id", metavar="ID", help="Job id (default: a random rl-xxxxxxxx)."
    ),
    ssh_config: str = typer.Option(
        None,
        "--ssh-config",
        metavar="FILE",
        help="ssh config file (default: ~/.ssh/config, or $RINGLEADER_SSH_CONFIG).",
    ),
    no_slurm: bool = typer.Option(
        False,
        "--no-slurm",
        help="Inside a Slurm allocation, ignore it and run the ranks on this machine.",
    ),
    slurm: bool = typer.Option(
        False,
        "--slurm",
        help="Submit as a Slurm batch job and follow its output to its end.",
        rich_help_panel=SLURM_PANEL,
    ),
    nodes: int = typer.Option(
        None,
        "-N",
        "--nodes",
        metavar="N",
        help="Nodes to allocate (default 1).",
        rich_help_panel=SLURM_PANEL,
    ),
    partition: str = typer.Option(
        None,
        "--partition",
        metavar="P",
        help="Partition (checked with sinfo).",
        rich_help_panel=SLURM_PANEL,
    ),
    time: str = typer.Option(
        None,
        "--time",
        metavar="T",
        help="Time limit, e.g. 1:00:00 or 2-0.",
        rich_help_panel=SLURM_PANEL,
    ),
    gpus_per_node: int = typer.Option(
        None,
        "--gpus-per-node",
        metavar="G",
        help="GPUs per node (ranks per node default to it).",
        rich_help_panel=SLURM_PANEL,
    ),
    account: str = typer.Option(
        None, "--account", metavar="A", help="Account to charge.", rich_help_panel=SLURM_PANEL
    ),
    sbatch_arg: list[str] = typer.Option(
        [],
        "--sbatch-arg",
        metavar="--OPT[=V]",
        help="One more sbatch option, as --sbatch-arg=--exclusive (repeatable).",
        rich_help_panel=SLURM_PANEL,
    ),
    output: str = typer.Option(
        None,
        "--output",
        metavar="FILE",
        help="The job's merged output file (default ./ringleader-slurm-%j.out).",
        rich_help_panel=SLURM_PANEL,
    ),
    detach: bool = typer.Option(
        False,
        "--detach",
        help="Submit, print the job id and how to follow it, and exit.",
        rich_help_panel=SLURM_PANEL,
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Print the sbatch script; submit nothing.",
        rich_help_panel=SLURM_PANEL,
    ),
    slurm_attach: str = typer.Option(
        None,
        "--slurm-attach",
        metavar="JOBID",
        help="Follow a Slurm job's output to its end (Ctrl-C stops following only).",
        rich_help_panel=SLURM_PANEL,
    ),
) -> None:
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

      ringleader launch -H a:2,b:2 --max-restarts 2 --log-dir logs -- python train.py

      ringleader launch --framework mpi -n 3 -- python -m mpi4py.bench helloworld

      salloc -N 2 ringleader launch --nproc-per-node 2 -- python train.py

      ringleader launch --slurm -N 2 --nproc-per-node 2 --time 1:00:00 -- python train.py
    """
    try:
        parse_ranks(ranks)
    except ValueError:
        raise typer.BadParameter(
            f"expected rank numbers like 0,2; got {ranks!r}", param_hint="--ranks"
        ) from None
    args = LaunchArgs(
        command=list(ctx.args),
        nproc=nproc,
        hostfile=hostfile,
        hosts=hosts,
        nproc_per_node=nproc_per_node,
        framework=framework,
        max_restarts=max_restarts,
        grace=grace,
        network_interface=network_interface,
        log_dir=log_dir,
        ranks=ranks,
        no_prefix=no_prefix,
        env=list(env),
        run_id=run_id,
        ssh_config=ssh_config,
        no_slurm=no_slurm,
        slurm=slurm,
        nodes=nodes,
        partition=partition,
        time=time,
        gpus_per_node=gpus_per_node,
        account=account,
        sbatch_arg=list(sbatch_arg),
        output=output,
        detach=detach,
        dry_run=dry_run,
        slurm_attach=slurm_attach,
    )
    raise typer.Exit(run(args))


launch.command_class = LaunchCommand  # type: ignore[attr-defined]  # used by cli/main.py

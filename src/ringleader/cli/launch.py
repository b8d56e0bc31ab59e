"""``ringleader launch``: start a gang of ranks and supervise it to the end."""

from __future__ import annotations

import signal
import sys

import typer

from ringleader.errors import RingleaderError
from ringleader.launch.options import build_spec, parse_env
from ringleader.launch.output import ConsoleSink
from ringleader.launch.result import render_summary
from ringleader.launch.ssh import SSHOptions

HELP = """Start COMMAND as a gang of ranks, here or on SSH hosts, and supervise it.

Every rank gets torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR ...).
If any rank fails, every rank everywhere is stopped and the first failure is
summarised; the exit code is that rank's.

Examples:

  ringleader launch -n 2 -- python train.py

  ringleader launch --hostfile hosts.json -- python train.py

  ringleader launch --hostfile hostfile --nproc-per-node 2 -- python train.py

  ringleader launch -H a:2,b:2 --max-restarts 2 --log-dir logs -- python train.py

  ringleader launch --framework mpi -n 3 -- python -m mpi4py.bench helloworld
"""


def _parse_ranks(value: str | None) -> set[int] | None:
    if not value:
        return None
    try:
        return {int(part) for part in value.split(",") if part.strip()}
    except ValueError:
        raise typer.BadParameter(
            f"expected rank numbers like 0,2; got {value!r}", param_hint="--ranks"
        ) from None


def launch(
    ctx: typer.Context,
    nproc: int = typer.Option(
        None, "-n", "--nproc", "--np", help="Total ranks (on this machine unless hosts are given)."
    ),
    hostfile: str = typer.Option(
        None, "--hostfile", help="MPI hostfile ('host slots=N') or MLX hosts.json."
    ),
    hosts: str = typer.Option(None, "-H", "--hosts", help="Hosts as 'a:2,b:2' (Horovod style)."),
    nproc_per_node: int = typer.Option(
        None, "--nproc-per-node", help="Ranks per host (overrides slots)."
    ),
    framework: str = typer.Option(
        "pytorch", "--framework", help="pytorch (default) or mpi (started by mpirun)."
    ),
    max_restarts: int = typer.Option(
        0, "--max-restarts", help="Restart the whole gang up to K times after a failure."
    ),
    grace: float = typer.Option(
        5.0, "--grace", help="Seconds between SIGTERM and SIGKILL when stopping ranks."
    ),
    network_interface: str = typer.Option(
        None, "--network-interface", help="Interface for gloo/NCCL on every host."
    ),
    log_dir: str = typer.Option(
        None, "--log-dir", help="Keep per-attempt, per-rank stdout/stderr files here."
    ),
    ranks: str = typer.Option(
        None, "--ranks", help="Show only these ranks on the console, e.g. 0,2."
    ),
    no_prefix: bool = typer.Option(
        False, "--no-prefix", help="Print rank lines without the [rank/world host] prefix."
    ),
    env: list[str] = typer.Option(
        [], "-e", "--env", help="Extra environment for every rank, KEY=VALUE (repeatable)."
    ),
    run_id: str = typer.Option(None, "--run-id", help="Job id (default: a random rl-xxxxxxxx)."),
    ssh_config: str = typer.Option(
        None,
        "--ssh-config",
        help="ssh config file (default: ~/.ssh/config, or $RINGLEADER_SSH_CONFIG).",
    ),
) -> None:
    from ringleader.launch.supervisor import Supervisor

    command = list(ctx.args)
    try:
        spec = build_spec(
            command,
            nproc=nproc,
            hostfile=hostfile,
            hosts_flag=hosts,
            nproc_per_node=nproc_per_node,
            framework=framework,
            max_restarts=max_restarts,
            grace_s=grace,
            network_interface=network_interface,
            env=parse_env(env),
            run_id=run_id,
        )
    except RingleaderError as exc:
        typer.echo(f"ringleader: error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    sink = ConsoleSink(show_ranks=_parse_ranks(ranks), with_prefix=not no_prefix, log_dir=log_dir)
    if framework == "mpi":
        from ringleader.launch.mpi import MPISupervisor as supervisor_cls
    else:
        supervisor_cls = Supervisor
    sup = supervisor_cls(spec, sink, SSHOptions.from_env(ssh_config))
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda s, _f: sup.request_stop(s))
    try:
        result = sup.run()
    finally:
        sink.close()
    if result.exit_code != 0:
        print(
            "ringleader: " + render_summary(result).replace("\n", "\nringleader: "), file=sys.stderr
        )
    raise typer.Exit(result.exit_code)

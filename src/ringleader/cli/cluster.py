"""Cluster commands: ``ssh-setup``, ``hostfile``, ``sync``, ``install`` (``doctor``: doctor.py).

They parse and print; the work is in ``ringleader.cluster`` and ``ringleader.hosts``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ringleader.cli.common import console, err_console, reports_errors

SSH_CONFIG_HELP = "An ssh config file to use (ssh -F FILE): aliases, users, ports, keys."
HOSTFILE_HELP = (
    'hosts.json (MLX form: [{"ssh": "host", "ips": ["addr"]}]) or an MPI hostfile '
    "(default: ./hosts.json when there is one)."
)
HOST_HELP = "A host (name, address or user@host); repeat the flag for several."
PYTHON_HELP = "The interpreter, at the same path on every host (default: this one)."


@reports_errors
def ssh_setup(
    hosts: list[str] = typer.Argument(
        ..., help="Hosts to set up: name, address, user@host or an alias of ~/.ssh/config."
    ),
    key_type: str = typer.Option(
        "ed25519",
        "--type",
        metavar="TYPE",
        help="Type of the key made when --key does not exist: ed25519 or rsa (4096 bits).",
    ),
    key: str = typer.Option(
        None,
        "--key",
        metavar="FILE",
        help="Private key to install (default ~/.ssh/id_TYPE); made without a passphrase"
        " when missing. One with a passphrase is refused unless ssh-agent holds it.",
    ),
    accept_new: bool = typer.Option(
        False,
        "--accept-new",
        help="Record unknown host keys without asking (their fingerprints are still shown);"
        " a key that changed is never replaced.",
    ),
    ssh_config: str = typer.Option(None, "--ssh-config", metavar="FILE", help=SSH_CONFIG_HELP),
    known_hosts: str = typer.Option(
        None,
        "--known-hosts",
        metavar="FILE",
        help="known_hosts file to check and record host keys in (default: the one ssh uses).",
    ),
    port: int = typer.Option(
        None, "--port", metavar="PORT", min=1, max=65535, help="SSH port (default: ssh's)."
    ),
) -> None:
    """Set up passwordless SSH: key pair, host keys, authorized_keys, batch-login check.

    Idempotent: run it again to check; a host that already works is left alone.
    ssh itself asks each host's password, at most once. The key must have no
    passphrase (ranks log in without a terminal): one that has is refused
    before any host is touched, unless the running ssh-agent holds it.

    Examples:

      ringleader ssh-setup 10.85.100.220 10.85.100.221 10.85.100.222

      ringleader ssh-setup --type rsa pi@mini-1 pi@mini-2 --accept-new

      ringleader ssh-setup --key ~/.ssh/id_cluster --port 2222 10.0.0.2
    """
    from ringleader.cluster import ssh_setup as ss

    private = Path(key).expanduser() if key else ss.default_key(key_type)
    created = ss.ensure_key(private, key_type)
    checked = ss.check_key(private)  # before any host: a passphrase is refused here
    console.print(f"{'created' if created else 'using'} key {private} ({checked.describe()})")
    setup = ss.Setup(
        key=private,
        ssh_config=ssh_config,
        known_hosts=Path(known_hosts).expanduser() if known_hosts else None,
        accept_new=accept_new,
        port=port,
    )
    results = [ss.setup_host(host, setup, _confirm) for host in hosts]
    table = Table("HOST", "RESULT", "DONE", box=None)
    for r in results:
        table.add_row(r.target, "[green]ok[/]" if r.ok else "[red]failed[/]", "; ".join(r.steps))
    console.print(table)
    failed = [r for r in results if not r.ok]
    for r in failed:
        err_console.print(f"[red]{r.target}[/]: {r.problem}\n  fix: {r.fix}", soft_wrap=True)
    if failed:
        raise typer.Exit(1)


def _confirm(target: str, fingerprints: list[str]) -> bool:
    """Show the host's key fingerprints; ask on a terminal, refuse otherwise."""
    console.print(f"The authenticity of host {target} can't be established. Its keys:")
    for line in fingerprints:
        console.print(f"  {line}")
    if not sys.stdin.isatty():
        err_console.print("  not a terminal: run again with --accept-new once verified")
        return False
    return typer.confirm("Are these the host's keys (verified)?", default=False)


@reports_errors
def hostfile(
    source: str = typer.Argument(
        None, help="hosts.json (MLX form) or an MPI hostfile (default: ./hosts.json)."
    ),
    output: str = typer.Option(
        None, "-o", "--output", metavar="FILE", help="Write here (default: stdout)."
    ),
    slots: int = typer.Option(
        None,
        "--slots",
        metavar="N",
        help="Slots (ranks) per host, for every host (default: from the file, else 1).",
    ),
    from_nodes: bool = typer.Option(
        False,
        "--from-nodes",
        help="The server's SSH nodes instead of a file (slots: each node's GPUs, else 1).",
    ),
) -> None:
    """Write the MPI hostfile (`ADDRESS slots=N` lines) of a hosts.json or the server's nodes.

    The conversion the guides do by hand; errors name file:line.

    Examples:

      ringleader hostfile hosts.json -o hostfile

      ringleader hostfile hosts.json --slots 8 | mpirun --hostfile /dev/stdin ...

      ringleader hostfile --from-nodes -o hostfile
    """
    from ringleader.errors import InvalidSpec
    from ringleader.hosts import Host, load_hostfile, to_mpi_hostfile, with_slots

    if slots is not None and slots < 1:
        raise InvalidSpec("must be at least 1", "--slots")
    if from_nodes and source:
        raise InvalidSpec("give a file or --from-nodes, not both", "--from-nodes")
    if from_nodes:
        from ringleader.cli.common import client

        nodes = [n for n in client().nodes() if n.kind == "ssh"]
        if not nodes:
            raise InvalidSpec("the server has no SSH nodes: `ringleader nodes add`", "--from-nodes")
        hosts = [Host(n.ssh, n.address, max(1, n.gpu_count)) for n in nodes]
    else:
        if not source and not Path("hosts.json").is_file():
            raise InvalidSpec("no hosts.json here: give a file or --from-nodes", "SOURCE")
        hosts = load_hostfile(source or "hosts.json")
    text = to_mpi_hostfile(with_slots(hosts, slots))
    if output:
        Path(output).write_text(text)
        count = len(text.splitlines())
        console.print(f"wrote {output} ({count} host{'s' if count != 1 else ''})")
    else:
        sys.stdout.write(text)


def pick_hosts(hosts: list[str] | None, hostfile: str | None) -> list[str]:
    """Hosts' ssh targets from the arguments, ``--hostfile``, or ``./hosts.json``."""
    return [h.ssh for h in pick_host_list(hosts, hostfile)]


def pick_host_list(hosts: list[str] | None, hostfile: str | None) -> list[Any]:
    """Hosts from the arguments, ``--hostfile``, or ``./hosts.json`` when present."""
    from ringleader.errors import InvalidSpec
    from ringleader.hosts import Host, load_hostfile, ssh_host

    if hostfile and hosts:
        raise InvalidSpec("give hosts or --hostfile, not both", "--hostfile")
    if hosts:
        return [Host(h, ssh_host(h)) for h in hosts]
    if not hostfile and Path("hosts.json").is_file():
        hostfile = "hosts.json"
        err_console.print("hosts from ./hosts.json")
    if not hostfile:
        raise InvalidSpec("no hosts: give them as arguments or with --hostfile", "HOSTS")
    return load_hostfile(hostfile)


def _outcomes(outcomes: list, what: str) -> None:
    table = Table("HOST", "RESULT", what.upper(), box=None)
    for o in outcomes:
        table.add_row(o.host, "[green]ok[/]" if o.ok else "[red]failed[/]", o.detail)
    console.print(table)
    for o in outcomes:
        if not o.ok and o.fix:
            err_console.print(f"[red]{o.host}[/]: fix: {o.fix}", soft_wrap=True)
    if not all(o.ok for o in outcomes):
        raise typer.Exit(1)


@reports_errors
def sync(
    directory: str = typer.Argument(
        ".", help="Directory to copy, to the same absolute path on every host (default: here)."
    ),
    hosts: list[str] = typer.Option(None, "-H", "--host", metavar="HOST", help=HOST_HELP),
    hostfile: str = typer.Option(None, "--hostfile", metavar="FILE", help=HOSTFILE_HELP),
    ssh_config: str = typer.Option(None, "--ssh-config", metavar="FILE", help=SSH_CONFIG_HELP),
) -> None:
    """Copy DIR to the same path on every host with rsync, in parallel.

    Honours .gitignore files and a .ringleaderignore (one rsync pattern per
    line); files deleted here are deleted there. Exit 1 if any host failed.

    Examples:

      ringleader sync --hostfile hosts.json

      ringleader sync ~/proj -H 10.0.0.2 -H 10.0.0.3
    """
    from rich.progress import BarColumn, Progress, TextColumn

    from ringleader.cluster import sync as cs
    from ringleader.launch.ssh import SSHOptions

    targets = pick_hosts(hosts, hostfile)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        console=console,
        transient=True,
    ) as bars:
        tasks = {h: bars.add_task(h, total=100) for h in targets}
        outcomes = cs.sync(
            Path(directory).expanduser(),
            targets,
            SSHOptions.from_env(ssh_config),
            lambda host, percent: bars.update(tasks[host], completed=percent),
        )
    _outcomes(outcomes, "synced")


@reports_errors
def install(
    pip_args: list[str] = typer.Argument(
        None, help="Arguments for `pip install`, after -- (packages, --index-url ...)."
    ),
    requirements: str = typer.Option(
        None,
        "-r",
        "--requirement",
        metavar="FILE",
        help="A requirements file, read on each host at this absolute path (sync it first).",
    ),
    hosts: list[str] = typer.Option(None, "-H", "--host", metavar="HOST", help=HOST_HELP),
    hostfile: str = typer.Option(None, "--hostfile", metavar="FILE", help=HOSTFILE_HELP),
    python: str = typer.Option(None, "--python", metavar="PATH", help=PYTHON_HELP),
    ssh_config: str = typer.Option(None, "--ssh-config", metavar="FILE", help=SSH_CONFIG_HELP),
) -> None:
    """pip install into the same interpreter on every host, in parallel; a table of outcomes.

    The requirements file is read on each host at the same path: `ringleader
    sync` it first. Exit 1 if any host failed.

    Examples:

      ringleader install -r requirements.txt --hostfile hosts.json

      ringleader install -H 10.0.0.2 -- torch==2.13.0 --index-url https://...

      ringleader install --python /opt/venv/bin/python -H a -H b -- numpy
    """
    import os

    from ringleader.cluster import sync as cs
    from ringleader.launch.ssh import SSHOptions

    args = list(pip_args or [])
    if requirements:
        args = ["-r", os.path.abspath(requirements), *args]
    outcomes = cs.install(
        python or sys.executable, args, pick_hosts(hosts, hostfile), SSHOptions.from_env(ssh_config)
    )
    _outcomes(outcomes, "pip")

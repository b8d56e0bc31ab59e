"""``ssh-setup``: passwordless SSH to hosts, as the guides do by hand, checked."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.table import Table

from ringleader.cli.common import console, err_console, reports_errors


@reports_errors
def ssh_setup(
    hosts: list[str] = typer.Argument(..., help="Hosts: name, address or user@host."),
    key_type: str = typer.Option("ed25519", "--type", help="Key type: ed25519 or rsa."),
    key: str = typer.Option(
        None, "--key", help="Private key to use or create (default ~/.ssh/id_TYPE)."
    ),
    accept_new: bool = typer.Option(
        False, "--accept-new", help="Record unknown host keys without asking (still shown)."
    ),
    ssh_config: str = typer.Option(None, "--ssh-config", help="ssh -F FILE."),
    known_hosts: str = typer.Option(
        None, "--known-hosts", help="known_hosts file (default: the one ssh uses)."
    ),
    port: int = typer.Option(None, "--port", help="SSH port (default: ssh's)."),
) -> None:
    """Set up passwordless SSH: key pair, host keys, authorized_keys, batch-login check.

    Idempotent: run it again to check; a host that already works is left alone.
    ssh itself asks each host's password, at most once.

    Examples:

      ringleader ssh-setup 10.85.100.220 10.85.100.221 10.85.100.222

      ringleader ssh-setup --type rsa pi@mini-1 pi@mini-2 --accept-new
    """
    from ringleader.cluster import ssh_setup as ss

    private = Path(key).expanduser() if key else ss.default_key(key_type)
    created = ss.ensure_key(private, key_type)
    console.print(f"{'created' if created else 'using'} key {private} ({key_type}, no passphrase)")
    setup = ss.Setup(
        key=private,
        key_type=key_type,
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
    source: str = typer.Argument(..., help="hosts.json (MLX form) or an MPI hostfile."),
    output: str = typer.Option(None, "-o", "--output", help="Write here (default: stdout)."),
    slots: int = typer.Option(
        None, "--slots", help="Slots per host (default: from the file, else 1)."
    ),
) -> None:
    """Write the MPI hostfile (`ADDRESS slots=N` per line) for a hosts.json.

    The conversion the guides do by hand; errors name file:line.

    Examples:

      ringleader hostfile hosts.json -o hostfile

      ringleader hostfile hosts.json --slots 8 | mpirun --hostfile /dev/stdin ...
    """
    from ringleader.errors import InvalidSpec
    from ringleader.hosts import load_hostfile, to_mpi_hostfile, with_slots

    if slots is not None and slots < 1:
        raise InvalidSpec("must be at least 1", "--slots")
    text = to_mpi_hostfile(with_slots(load_hostfile(source), slots))
    if output:
        Path(output).write_text(text)
        console.print(f"wrote {output} ({len(text.splitlines())} hosts)")
    else:
        sys.stdout.write(text)

"""``ringleader testhosts up/down/list``: SSH hosts on this machine, to try multi-host.

They parse and print; the work is in ``ringleader.cluster.testhosts.kept``. ``up``
says each change as it makes it and ends with the commands to type next; ``down``
says each removal. The state they share is ``$RINGLEADER_HOME/testhosts``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import typer
from rich.table import Table

from ringleader.cli.common import console, reports_errors
from ringleader.cluster.testhosts import kept as hosts_kept
from ringleader.cluster.testhosts import rate as link_rate
from ringleader.cluster.testhosts.kept import MAX_HOSTS, Kept
from ringleader.defaults import home_dir
from ringleader.errors import Conflict, InvalidSpec

app = typer.Typer(
    help="Test hosts on this machine: network namespaces, each with its own sshd (root)."
    "\n\nExamples:\n\n  ringleader testhosts up 3"
    "\n\n  ringleader testhosts up 4 --rate 100mbit"
    "\n\n  ringleader doctor --hostfile ~/.ringleader/testhosts/hosts.json",
    no_args_is_help=True,
)


def _print(text: str) -> None:
    """A line as written: no markup, and never broken inside (a path stays whole to copy)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def _say(line: str) -> None:
    _print(f"  {line}")


def _made(found: Kept) -> str:
    """When and by which process the network was made, for people."""
    try:
        with_zone = datetime.fromisoformat(found.created)
    except (TypeError, ValueError):  # a state file edited by hand: said, never a crash
        return f"made at an unreadable time ({found.created!r}) by pid {found.creator.pid}"
    return f"made {with_zone:%Y-%m-%d %H:%M} UTC by pid {found.creator.pid}"


@app.command("up")
@reports_errors
def up(
    n: int = typer.Argument(..., help=f"How many hosts to make, 1 to {MAX_HOSTS}."),
    rate: str = typer.Option(
        None,
        "--rate",
        metavar="RATE",
        help="Limit each host's link to RATE each way (tc tbf), e.g. 100mbit, 1gbit;"
        " change it later with `ringleader testhosts rate`.",
    ),
) -> None:
    """Make N test hosts: network namespaces on a bridge, each with its own sshd.

    Each host has its own address (10.77.X.10, .11, ...), hostname, host key
    and sshd on port 22, reached from here over a bridge, with a key made for
    them: a multi-machine walkthrough's hosts, on one machine. Needs root.
    Prints each change as it is made, writes hosts.json and an ssh config under
    $RINGLEADER_HOME/testhosts, and the commands to type next. Nothing is left
    half-made: a failure undoes what was made.

    With --rate each host's link sends and receives at most that rate, as
    on a slower network (bandwidth only: no added delay).

    Examples:

      ringleader testhosts up 3

      ringleader testhosts up 4 --rate 100mbit
    """
    bits = _checked_rate(rate, "--rate") if rate is not None else None
    plural = "s" * (n != 1)
    header = [f"Making {n} test host{plural} on this machine (undo: ringleader testhosts down):"]

    def say(line: str) -> None:  # the header with the first change: none before a refusal
        while header:
            _print(header.pop())
        _say(line)

    made = hosts_kept.up(n, home_dir(), say)
    if bits is not None:
        _limit_or_undo(made, bits, say)
    d = made.dir
    last = f"h{n - 1}/" if n > 1 else ""
    files = [
        ("hosts.json", "the hosts, for --hostfile (MLX form: ssh, ips)"),
        ("ssh_config", "for --ssh-config / RINGLEADER_SSH_CONFIG: key, host keys"),
        ("id_ed25519, .pub", "the key root logs in with (made for these hosts)"),
        ("known_hosts", "the hosts' keys: ssh checks them (StrictHostKeyChecking)"),
        ("authorized_keys", "the key each host's sshd accepts"),
        (f"h0/{' .. ' + last if last else ''}", "a host's key, sshd_config, sshd.log"),
        ("hosts", "each host's /etc/hosts: the network's names"),
        ("resolv.conf", "each host's /etc/resolv.conf: no nameserver (no DNS)"),
        ("bashrc", "root's ~/.bashrc on each host (PATH as here)"),
        ("state.json", "what `ringleader testhosts down` removes"),
    ]
    _print(f"Files written, all in {d}:")
    for name, what in files:
        _print(f"  {name:<18}{what}")
    _print("Also: /run/sshd (sshd's, kept), the lock /run/ringleader-testhosts.lock.")
    _print("Undo all of it: ringleader testhosts down\n")
    config, hostfile = shlex.quote(str(made.ssh_config)), shlex.quote(str(made.hosts_file))
    _print("Next:")
    for line in (
        f"export RINGLEADER_SSH_CONFIG={config}",
        f"ringleader doctor --hostfile {hostfile}",
        f"ringleader launch --hostfile {hostfile} -- \\",
        "    python -m ringleader.examples.digits",
    ):
        _print(f"  {line}")


def _checked_rate(text: str, flag: str) -> int | None:
    """The rate in bits/s (None: no limit); ``InvalidSpec`` naming the flag if not one."""
    try:
        return link_rate.parse_rate(text)
    except ValueError as exc:
        raise InvalidSpec(str(exc), flag) from None


def _limit_or_undo(made: Kept, bits: int, say: Callable[[str], None]) -> None:
    """Give fresh hosts their rate; when tc fails, take them down again (all or nothing)."""
    try:
        for line in link_rate.set_rate(link_rate.kept_links(made.hosts), bits):
            say(line)
        link_rate.record(made.dir, bits)
    except Exception:
        say("setting the rate failed: taking the hosts down again")
        hosts_kept.down(home_dir(), say)
        raise


@app.command("rate")
@reports_errors
def set_rate(
    rate: str = typer.Argument(
        ..., help="The rate each way, e.g. 100mbit, 1gbit, 500kbit; none removes it."
    ),
) -> None:
    """Limit the running test hosts' links to RATE each way, or none.

    A token bucket (tc qdisc tbf) on both ends of each host's veth: the host
    sends and receives at most RATE, as on a slower network. Replaces the rate
    `up --rate` or an earlier `rate` set; `down` removes it with the hosts.
    Needs root.

    Examples:

      ringleader testhosts rate 100mbit

      ringleader testhosts rate none
    """
    bits = _checked_rate(rate, "RATE")
    hosts_kept.require_root("rate", f" {rate}")
    found = Kept.read(hosts_kept.state_dir(home_dir()))
    if found is None or found.phase != "up":
        what = "are not up" if found is None else f"are {found.phase}, not up"
        raise Conflict(
            f"test hosts for {home_dir()} {what}: no link to limit"
            "\n  fix: ringleader testhosts up 3 --rate " + link_rate.rate_text(bits)
        )
    for line in link_rate.set_rate(link_rate.kept_links(found.hosts), bits):
        _say(line)
    link_rate.record(found.dir, bits)
    _print(f"Test hosts {found.tag}: link rate {link_rate.rate_text(bits)}.")


@app.command("down")
@reports_errors
def down() -> None:
    """Remove the test hosts `up` made: sshds, namespaces, links, files.

    Found by the state `up` wrote in $RINGLEADER_HOME/testhosts, even when
    that `up` was killed midway; each sshd is signalled only while /proc
    shows the very process `up` recorded. Safe to run again; with nothing
    up it says so and changes nothing. Needs root.

    Example:

      ringleader testhosts down
    """
    hosts_kept.require_root("down")
    home = home_dir()
    found = Kept.read(hosts_kept.state_dir(home))
    if found is not None:
        _print(f"Taking down test hosts {found.tag} ({found.n} hosts, {_made(found)}):")
    if hosts_kept.down(home, _say):
        _print("Nothing of them is left.")
        return
    state = hosts_kept.state_dir(home) / hosts_kept.STATE_FILE
    _print(f"No test hosts are up for {home}: nothing to take down.")
    _print(f"(There is no {state}.)")
    _others(hosts_kept.state_dir(home), "down")


@app.command("list")
@reports_errors
def list_hosts() -> None:
    """Show the test hosts `up` made: each address, namespace and sshd.

    Also names test hosts made for other homes ($RINGLEADER_HOME) here.

    Example:

      ringleader testhosts list
    """
    directory = hosts_kept.state_dir(home_dir())
    found = Kept.read(directory)
    if found is None:
        _print(f"No test hosts are up for {home_dir()}.")
        _print("Make some: ringleader testhosts up 3")
        _others(directory, "list")
        return
    states = hosts_kept.host_states(found)
    _print(f"Test hosts {found.tag}: {_phase(found, states)}")
    _print(f"{found.n} hosts, {_made(found)}")
    _print(f"link rate: {link_rate.rate_text(link_rate.recorded(found.dir))} each way")
    _print(f"state: {directory / hosts_kept.STATE_FILE}")
    table = Table("HOST", "ADDRESS", "NETNS", "SSHD", box=None)
    for s in states:
        sshd = "not started" if s.sshd_pid is None else f"pid {s.sshd_pid}"
        if s.sshd_pid is not None:
            sshd += ", answers" if s.answers else (", runs" if s.sshd_running else ", gone")
        table.add_row(str(s.index), s.address or "-", s.netns, sshd)
    console.print(table)
    if found.phase == "up":
        _print(f"hosts file: {found.hosts_file}")
        _print(f"ssh config: {found.ssh_config}")
    _others(directory, "list")


def _phase(found: Kept, states: list[hosts_kept.HostState]) -> str:
    """One phrase for the network as it is now, with what to do when it is not up."""
    if found.phase == "creating":
        if found.creator.alive():
            return f"being made by pid {found.creator.pid}"
        return "half-made: its `up` was stopped (`ringleader testhosts down` removes it)"
    if found.phase == "failed":
        return "half-made: its `up` failed and could not undo all (`ringleader testhosts down`)"
    silent = [str(s.index) for s in states if not s.answers]
    if silent:
        return (
            f"up, but host {', '.join(silent)} does not answer"
            " (`ringleader testhosts down`, then up again)"
        )
    return "up"


def _others(mine: Path, verb: str) -> None:
    """Name the networks other homes made here, and how to reach each."""
    for tag, owner in hosts_kept.other_networks(mine):
        home = shlex.quote(str(owner.parent))
        _print(
            f"Test hosts {tag} of another home are up here:"
            f" RINGLEADER_HOME={home} ringleader testhosts {verb}"
        )

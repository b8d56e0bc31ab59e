"""``nodes add``, ``nodes import`` and ``nodes remove``: register SSH hosts with the server.

The server probes each host over SSH with its own keys (so ``ssh-setup`` must
have been run as the server's user) and stores what it found; ``nodes list``
(in ``cli/top.py``) shows them with their allocation and Ready/NotReady.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError
from rich.table import Table

from ringleader.cli.common import client, console, err_console, reports_errors
from ringleader.errors import Conflict, InvalidSpec, RingleaderError
from ringleader.sched.text import decimal_size as size

if TYPE_CHECKING:
    from ringleader.server.schemas import NodeIn, NodeOut


def _body(ssh: str, name: str | None, address: str | None, pool: str) -> NodeIn:
    """The registration request; a malformed value is refused here, naming its flag."""
    from ringleader.server.schemas import NodeIn

    given: dict[str, Any] = {"ssh": ssh, "pool": pool}
    if name:
        given["name"] = name
    if address:
        given["address"] = address
    try:
        return NodeIn(**given)
    except ValueError as exc:  # pydantic's ValidationError: the first field it names
        errors = exc.errors() if isinstance(exc, ValidationError) else []
        field = str(errors[0]["loc"][0]) if errors and errors[0]["loc"] else ""
        problem = errors[0]["msg"] if errors else str(exc)
        flag = {"ssh": "--ssh", "name": "HOST", "address": "--address", "pool": "--pool"}
        raise InvalidSpec(f"{given.get(field)!r}: {problem}", flag.get(field, field)) from None


def _facts_row(node: NodeOut) -> list[str]:
    facts = node.facts
    return [
        node.status,
        f"{node.cpu_cores:g}",
        size(node.memory_bytes),
        str(node.gpu_count),
        f"{facts.get('python') or '-'} {facts.get('python_version') or ''}".strip(),
        facts.get("torch") or "-",
        facts.get("ringleader") or "-",
    ]


def _report(results: list[tuple[str, NodeOut | None, str]]) -> int:
    """Print one row per host; the number of hosts that failed."""
    table = Table(
        "NODE", "RESULT", "STATUS", "CPU", "MEMORY", "GPUs", "PYTHON", "TORCH", "RINGLEADER",
        box=None,
    )  # fmt: skip
    failed = 0
    for name, node, problem in results:
        if node is not None:
            table.add_row(name, "[green]added[/]", *_facts_row(node))
        elif problem.startswith("already"):
            table.add_row(name, "already registered", *["-"] * 7)
        else:
            failed += 1
            table.add_row(name, "[red]failed[/]", *["-"] * 7)
    console.print(table)
    for name, node, problem in results:
        if node is None and not problem.startswith("already"):
            err_console.print(f"[red]{name}[/]: {problem}", soft_wrap=True)
        elif node is not None and node.status != "Ready":
            err_console.print(f"[yellow]{name}[/] is NotReady: {node.message}", soft_wrap=True)
    return failed


@reports_errors
def add(
    host: str = typer.Argument(
        ..., metavar="HOST", help="The host: a name or address (also its node name)."
    ),
    ssh: str = typer.Option(
        None, "--ssh", metavar="USER@HOST", help="Login target (default: HOST)."
    ),
    address: str = typer.Option(
        None,
        "--address",
        metavar="ADDRESS",
        help="Address other nodes reach it at (default: the ssh host).",
    ),
    pool: str = typer.Option("default", "--pool", metavar="POOL", help="Node pool."),
) -> None:
    """Register an SSH host as a node, probed over SSH by the server first.

    The probe finds CPU cores, memory, GPUs and their memory, OS, Python and the
    torch and ringleader versions.

    The server logs in with its own keys: run `ringleader ssh-setup HOST` first as
    the user the server runs as. Admins only.

    Examples:

      ringleader nodes add gpu1

      ringleader nodes add gpu2 --ssh ubuntu@10.0.0.12 --pool a100

      ringleader nodes add gpu3 --ssh ubuntu@gpu3 --address 192.168.100.13
    """
    name = host if ssh else None
    node = client().add_node(_body(ssh or host, name, address, pool))
    if _report([(node.name, node, "")]):
        raise typer.Exit(1)


@reports_errors
def import_hosts(
    source: str = typer.Argument(
        ..., metavar="FILE", help="hosts.json (MLX form) or an MPI hostfile."
    ),
    pool: str = typer.Option(
        "default", "--pool", metavar="POOL", help="Node pool for all of them."
    ),
) -> None:
    """Register every host of a hosts.json or MPI hostfile, probed in parallel.

    Hosts already registered are left as they are, so importing twice is safe.
    Exit code 1 if any host could not be added; the others are added anyway.

    Example: ringleader nodes import hosts.json
    """
    from ringleader.hosts import load_hostfile

    hosts = load_hostfile(source)
    api = client()

    def one(host: Any) -> tuple[str, NodeOut | None, str]:
        try:
            return host.name, api.add_node(_body(host.ssh, host.name, host.address, pool)), ""
        except Conflict as exc:
            return host.name, None, f"already registered ({exc})"
        except RingleaderError as exc:
            return host.name, None, str(exc)

    with ThreadPoolExecutor(max(1, min(16, len(hosts)))) as workers:
        results = list(workers.map(one, hosts))
    if _report(results):
        raise typer.Exit(1)


@reports_errors
def remove(
    names: list[str] = typer.Argument(
        ..., metavar="NODE", help="Node names, as `nodes list` shows them."
    ),
) -> None:
    """Unregister SSH nodes that no live workload holds.

    A node that live workloads hold is refused (409) until they are deleted,
    suspended or done.

    Example: ringleader nodes remove gpu1 gpu2
    """
    api = client()
    for name in names:
        api.remove_node(name)
        console.print(f"node {name} removed")

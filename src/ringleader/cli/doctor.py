"""``ringleader doctor``: the preflight check of a host list, printed as a table.

The checks themselves are in ``ringleader.cluster.doctor`` (and ``busbw`` for
the bandwidth test); this module parses flags and prints what they found.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.table import Table

from ringleader.cli.cluster import (
    HOSTFILE_HELP,
    PYTHON_HELP,
    SSH_CONFIG_HELP,
    pick_host_list,
)
from ringleader.cli.common import console, reports_errors


@reports_errors
def doctor(
    hosts: list[str] = typer.Argument(
        None, help="Hosts to check (name, address or user@host); the first is the master."
    ),
    hostfile: str = typer.Option(None, "--hostfile", metavar="FILE", help=HOSTFILE_HELP),
    workdir: str = typer.Option(
        None,
        "--workdir",
        metavar="DIR",
        help="The code's directory, at the same path on every host (default: here).",
    ),
    python: str = typer.Option(None, "--python", metavar="PATH", help=PYTHON_HELP),
    network_interface: str = typer.Option(
        None,
        "--network-interface",
        metavar="IFACE",
        help="The interface ranks will use (e.g. eth0), checked on every host (default:"
        " the one each host routes to the master through).",
    ),
    ssh_config: str = typer.Option(None, "--ssh-config", metavar="FILE", help=SSH_CONFIG_HELP),
    min_free_gb: float = typer.Option(
        1.0,
        "--min-free-gb",
        metavar="GB",
        help="Free disk space each host needs in the working directory, in GB.",
    ),
    bandwidth: bool = typer.Option(
        True,
        "--bandwidth/--no-bandwidth",
        help="After the checks, when every one passed, measure allreduce bus bandwidth over"
        " gloo across the hosts (one rank each).",
    ),
    sizes: str = typer.Option(
        "1M,16M,64M",
        "--sizes",
        metavar="SIZES",
        help="Allreduce sizes for the bandwidth test, comma-separated, binary units"
        " (4K = 4096 bytes).",
    ),
    image: str = typer.Option(
        None,
        "--image",
        metavar="IMAGE",
        help="Check every host holds this local image with the same ID (image drift).",
    ),
    require_paths: list[str] = typer.Option(
        [],
        "--require-path",
        metavar="PATH",
        help="A path that must exist on every host, e.g. /opt/intel/oneapi (repeatable;"
        ' also a hosts.json\'s "require_paths").',
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON document instead of tables (for scripts)."
    ),
) -> None:
    """Check every host before a run: one table, a row per host, the fix for each failure.

    Login, working directory, interpreter, torch/ringleader versions, code
    fingerprint, disk, GPUs, clock skew, the interface toward the master, and
    TCP between every pair of hosts, with --image that each holds that image as
    here; then a gloo allreduce across all of them, with the bus bandwidth for
    each size. Exit code 1 when anything fails.

    Examples:

      ringleader doctor --hostfile hosts.json

      ringleader doctor 10.0.0.1 10.0.0.2 --network-interface eth0 --json

      ringleader doctor --sizes 1K,1M,256M

      ringleader doctor pi@mini-1 pi@mini-2 --no-bandwidth --min-free-gb 20

      ringleader doctor gpu1 gpu2 --image localhost/team/train:1   # image drift

      ringleader doctor --hostfile hosts.json --require-path /opt/intel/oneapi
    """
    import os

    from ringleader.cluster import busbw
    from ringleader.cluster import doctor as doc
    from ringleader.launch.ssh import SSHOptions

    size_list = _checked_sizes(sizes)
    picked = pick_host_list(hosts, hostfile)
    targets = [(h.ssh, h.ssh) for h in picked]
    image_id = _local_image_id(image) if image else ""
    plan = doc.Plan(
        hosts=targets,
        workdir=os.path.abspath(workdir or os.getcwd()),
        python=python or sys.executable,
        interface=network_interface,
        ssh=SSHOptions.from_env(ssh_config),
        min_free_bytes=int(min_free_gb * 1e9),
        master=picked[0].address,
        image=image or "",
        image_id=image_id,
        require_paths=tuple(_checked_paths(require_paths) + _file_paths(hostfile)),
    )
    reports = doc.run(plan)
    measured = None
    if bandwidth and all(r.ok for r in reports) and size_list:
        measured = busbw.run_across(
            [(h.ssh, h.address) for h in picked],
            size_list,
            plan.workdir,
            ssh_config=plan.ssh.config_file,
            interface=network_interface,
        )
    if as_json:
        sys.stdout.write(json.dumps(_json_report(reports, measured), indent=2) + "\n")
    else:
        below = ("image",) * bool(image) + ("paths",) * bool(plan.require_paths)
        _doctor_table(reports, doc.CHECKS, below)
        if measured:
            _bandwidth_table(measured, len(picked))
    if not all(r.ok for r in reports) or (measured and measured.error):
        raise typer.Exit(1)


def _local_image_id(image: str) -> str:
    """This machine's ID of ``image`` (what every host must hold), or the error."""
    from ringleader.cluster.image_sync import image_id
    from ringleader.cluster.images import require_tool
    from ringleader.errors import InvalidSpec, RingleaderError
    from ringleader.launch.containers import bad_reference

    if problem := bad_reference(image):
        raise InvalidSpec(f"{image!r} is not an image reference: {problem}", "--image")
    found = image_id(require_tool("podman", "podman"), image)
    if not found:
        raise RingleaderError(f"no image {image} here (`podman images` lists what there is)")
    return found


def _checked_paths(paths: list[str]) -> list[str]:
    """``--require-path`` values: absolute paths (a relative one would be each host's
    login directory's), else InvalidSpec naming the flag."""
    from ringleader.errors import InvalidSpec

    for path in paths:
        if not path.startswith("/"):
            raise InvalidSpec(f"{path!r} is not an absolute path", "--require-path")
    return paths


def _file_paths(hostfile: str | None) -> list[str]:
    """The hosts.json's own ``"require_paths"`` (checked like --require-path)."""
    from ringleader.hosts import required_paths

    return required_paths(hostfile) if hostfile else []


def _checked_sizes(sizes: str) -> list[str]:
    """``--sizes`` as a list, each a size ``busbw`` reads; InvalidSpec naming it if not."""
    from ringleader.cluster import busbw
    from ringleader.errors import InvalidSpec

    size_list = [s for s in sizes.split(",") if s.strip()]
    try:
        for size in size_list:
            busbw.parse_size(size)
    except ValueError as exc:
        raise InvalidSpec(str(exc), "--sizes") from None
    return size_list


def _json_report(reports: list[Any], measured: Any) -> dict[str, Any]:
    """``doctor --json``'s document: the verdict, each host's checks and facts, the
    bandwidth measured (None when it was not)."""
    return {
        "ok": all(r.ok for r in reports) and not (measured and measured.error),
        "hosts": [
            {
                "host": r.host,
                "ok": r.ok,
                "checks": {k: vars(c) for k, c in r.checks.items()},
                "facts": r.facts,
            }
            for r in reports
        ],
        "bandwidth": vars(measured) if measured else None,
    }


def _bandwidth_table(measured: Any, ranks: int) -> None:
    from ringleader.cluster import busbw

    if measured.error:
        console.print(f"[red]allreduce across the {ranks} hosts failed[/]:\n{measured.error}")
        console.print(
            "  fix: check the interface (--network-interface), firewalls between the hosts, "
            "and that torch imports on each"
        )
        return
    table = Table(
        "SIZE", "EACH RANK MOVES 2(N-1)K/N", "TIME", "ALGBW", "BUS BW",
        title=f"allreduce over gloo, {ranks} ranks (one per host)", box=None,
    )  # fmt: skip
    for row in measured.rows:
        table.add_row(
            _bytes(row["bytes"]),
            _bytes(row["moved"]),
            busbw.duration_text(row["seconds"]),
            busbw.rate_text(row["algbw"]),
            busbw.rate_text(row["busbw"]),
        )
    console.print(table)


def _bytes(count: float) -> str:
    for unit, size in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if count >= size:
            return f"{count / size:.4g}{unit}"
    return f"{count:.0f}"


def _doctor_table(reports: list, checks: tuple[str, ...], below: tuple[str, ...] = ()) -> None:
    """``checks`` as columns; ``below`` (``--image``) said in lines under the table,
    which has no room left at 80 columns."""
    # One space between columns, the host never cut: 3 addresses fit 80 columns.
    table = Table(box=None, padding=(0, 1, 0, 0))
    table.add_column("HOST", no_wrap=True, min_width=max(len(r.host) for r in reports))
    for check in checks:
        table.add_column(check.upper())
    marks = {True: "[green]ok[/]", False: "[red]FAIL[/]", None: "[dim]-[/]"}
    for r in reports:
        table.add_row(r.host, *(marks[r.checks[c].ok] for c in checks))
    console.print(table)
    for name in below:
        found = [r.checks[name] for r in reports]
        if all(c.ok for c in found):
            console.print(f"{name}: {found[0].detail} on every host")
    for r in reports:
        for name in checks + below:
            check = r.checks[name]
            if check.ok is False:
                console.print(f"[red]{r.host}[/] {name}: {check.detail}\n  fix: {check.fix}")
    if all(r.ok for r in reports):
        first = reports[0].checks
        ready = "the host is ready" if len(reports) == 1 else f"all {len(reports)} hosts ready"
        console.print(f"{ready}; code: {first['code'].detail}")

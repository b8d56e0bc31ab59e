"""Run:ai CLI v1 verbs: list, describe/get, logs, delete, suspend...

The submit verbs are in ``cli/submit.py``; every command reads and prints the
client's typed models (``WorkloadOut``...), and ``cli/show.py`` lays them out for
a terminal of any width (or as JSON/YAML).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from ringleader.cli.common import client, console, err_console, reports_errors, wraps
from ringleader.cli.tables import Output, output_option
from ringleader.errors import NotFound, RingleaderError

if TYPE_CHECKING:
    from ringleader.client import Client
    from ringleader.server.schemas import WorkloadOut


OUTPUT = typer.Option(
    None,
    "-o",
    "--output",
    metavar="wide|json|yaml",
    callback=output_option,
    help="wide: every column, as wide as it takes; json or yaml: the API's objects, for scripts.",
)
PROJECT = typer.Option(
    None, "-p", "--project", metavar="NAME", help="Project (default: the current one)."
)
RAW = typer.Option(
    False,
    "--raw",
    help="Print the workload's own text as it is, control characters too "
    "(by default they are shown as ^[ and the like: a terminal would obey them).",
)
WAIT_POLL_S = 1.0  # how often `logs -f` looks again at a workload that waits to start
# How many workloads ``list`` shows by default: a screenful or two that a terminal
# prints at once (500, the API's most, takes rich a second to lay out).
LIST_LIMIT = 100
ENDED = ("Completed", "Failed", "Stopped", "Deleting", "Deleted")  # a follow ends with these


@reports_errors
def list_workloads(
    all_projects: bool = typer.Option(
        False, "-A", "--all-projects", help="Workloads of every project."
    ),
    project: str = PROJECT,
    limit: int = typer.Option(
        LIST_LIMIT,
        "--limit",
        metavar="N",
        min=1,
        max=500,
        help="Show the newest N (at most 500); a note on stderr says how many more.",
    ),
    output: str = OUTPUT,
) -> None:
    """List workloads with Run:ai's columns.

    A narrow terminal shows fewer columns, never a cut status; -o wide shows all.
    The newest come first; past --limit, stderr says how many are not shown.

    Example: ringleader list -A
    """
    from ringleader.cli.safetext import visible_data
    from ringleader.cli.show import print_list

    c = client()
    filters = [] if all_projects else [f"projectName=={project or c.project or 'default'}"]
    listing = c.list_workloads(filters, limit=limit)
    print_list(console, listing, visible_data(listing.workloads), all_projects, output)
    shown = len(listing.workloads)
    if listing.total > shown and output not in (Output.json, Output.yaml):
        more = f"--limit {min(500, listing.total)} shows more" if shown < 500 else "-p narrows"
        err_console.print(
            f"the newest {shown:,} of {listing.total:,} workloads; {more}",
            markup=False,
            highlight=False,
        )


@reports_errors
def describe(
    name: str = typer.Argument(..., help="Workload name or id."),
    project: str = PROJECT,
    output: str = OUTPUT,
    raw: bool = RAW,
) -> None:
    """Show a workload: spec, phase with its reason, pods, events.

    Its text (a failure's message, events) is the workload's own: control
    characters in it are shown, not sent to the terminal (--raw sends them).

    Example: ringleader describe mnist
    """
    from ringleader.cli.safetext import visible_data
    from ringleader.cli.show import print_describe

    c = client()
    w = c.find(name, project)
    shown = (w, c.pods(w.workload_id), c.events(w.workload_id))
    if not raw:  # -o json and yaml escape them themselves
        shown = visible_data(shown)
    print_describe(console, *shown, output)


@reports_errors
def logs(
    name: str = typer.Argument(..., help="Workload name or id."),
    follow: bool = typer.Option(
        False,
        "-f",
        "--follow",
        help="Keep printing until the workload ends (waits for a Pending one to start).",
    ),
    pod: str = typer.Option(
        None,
        "--pod",
        metavar="POD",
        help="One pod, e.g. master-0 or worker-1 (default: all, merged).",
    ),
    tail: int = typer.Option(None, "-t", "--tail", metavar="N", help="Only the last N lines."),
    since: str = typer.Option(
        None,
        "--since",
        metavar="AGE",
        help="Only lines newer than AGE (5m, 2h) or an ISO time (2025-01-31T12:00).",
    ),
    timestamps: bool = typer.Option(False, "--timestamps", help="Prefix each line with its time."),
    project: str = PROJECT,
    raw: bool = RAW,
) -> None:
    """Print a workload's logs: every pod merged and prefixed, or one pod.

    A workload that waits to start has no logs yet: it says why it waits
    (on stderr), and with -f waits for it to start, then follows it.

    On a terminal, control characters the workload printed are shown (ESC as
    ^[), not obeyed; --raw sends them as they are.  Into a pipe or a file the
    lines are exact.

    Example: ringleader logs mnist -f
    """
    from ringleader.cli.safetext import visible
    from ringleader.server.workload_words import WAITING

    shown = (lambda line: line) if raw or not sys.stdout.isatty() else visible
    c = client()
    w = c.find(name, project)
    if w.actual_phase in WAITING:
        w = _wait_to_start(c, w, follow)
        if w is None:
            return
    printed = 0
    for line in c.logs(
        w.workload_id, pod=pod, tail=tail, since=since, follow=follow, timestamps=timestamps
    ):
        sys.stdout.write(shown(line) + "\n")
        sys.stdout.flush()
        printed += 1
    if follow:  # a follow ends with the workload, or because the server went away
        try:
            after = c.workload(w.workload_id)  # a server that stopped: ServerUnreachable
        except NotFound:
            err_console.print(f"{w.name} was deleted", markup=False)
            return
        if after.actual_phase not in ENDED:
            raise RingleaderError(
                f"the log stream ended while {w.name} is {after.actual_phase} (the server "
                f"restarted?)\n  fix: `ringleader logs {w.name} -f` goes on following it"
            )
    if not printed and not (since or tail == 0):
        _say_why_silent(c.workload(w.workload_id))


def _wait_to_start(c: Client, w: WorkloadOut, follow: bool) -> WorkloadOut | None:
    """Say why ``w`` waits; with ``follow``, wait until it has started (the workload
    then), else None: there is nothing to print yet."""
    from ringleader.cli.safetext import visible_data
    from ringleader.server.workload_words import WAITING, why_waiting

    w = visible_data(w)  # its message is tenant-written, and stderr is a terminal
    said = why_waiting(w)
    err_console.print(f"{w.name} is {w.actual_phase}: {said}", markup=False, soft_wrap=True)
    if not follow:
        err_console.print(
            f"  it has no logs yet; `ringleader logs {w.name} -f` waits for it to start "
            "and follows it",
            markup=False,
            soft_wrap=True,
        )
        return None
    err_console.print(
        "  waiting for it to start (Ctrl-C stops waiting; the workload stays queued)",
        markup=False,
        soft_wrap=True,
    )
    while w.actual_phase in WAITING:
        time.sleep(WAIT_POLL_S)  # the API has no phase-change stream to wait on
        w = visible_data(c.workload(w.workload_id))
        if w.actual_phase in WAITING and why_waiting(w) != said:
            said = why_waiting(w)
            err_console.print(f"{w.name} is {w.actual_phase}: {said}", markup=False, soft_wrap=True)
    err_console.print(f"{w.name} is {w.actual_phase}", markup=False)
    return w


def _say_why_silent(w: WorkloadOut) -> None:
    """No line came: say so when the workload's status explains it (it ended, or has
    not started), so an empty answer is not a mystery."""
    from ringleader.cli.safetext import visible_data
    from ringleader.cli.show import status_lines

    w = visible_data(w)
    if w.actual_phase in ("Running", "Initializing", "Degraded"):
        # It runs and has printed nothing yet: say so, and what to do with a shell's.
        spec = (w.spec or {}).get("spec") or {}
        said = f"no log lines yet: {w.name} is {w.actual_phase} and has printed nothing"
        if spec.get("interactive"):
            command = spec.get("command") or "a keepalive"
            said += (
                f" (interactive: its command is {command}; `ringleader bash {w.name}` opens"
                " a shell in it, whose output is the shell's, not the logs')"
            )
        err_console.print(said + "; `-f` follows it", markup=False, soft_wrap=True)
        return
    lines = status_lines(w, err_console.width if wraps(err_console) else None)
    err_console.print(f"no log lines; {w.name}'s " + lines[0][0].lower() + lines[0][1:],
                      markup=False, soft_wrap=True)  # fmt: skip
    for line in lines[1:]:
        err_console.print(line, markup=False, soft_wrap=True)


def _action(verb: str, done: str) -> Callable[..., None]:  # one Typer command per verb
    @reports_errors
    def command(
        name: str = typer.Argument(..., help="Workload name or id."),
        project: str = PROJECT,
    ) -> None:
        c = client()
        w = c.find(name, project)
        c.action(w.workload_id, verb)
        console.print(f"The workload '{w.name}' {done}")

    command.__doc__ = f"{verb.capitalize()} a workload.\n\nExample: ringleader {verb} mnist"
    return command


delete = _action("delete", "is being deleted")
suspend = _action("suspend", "is being suspended")
resume = _action("resume", "is being resumed")

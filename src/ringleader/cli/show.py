"""How ``list``, ``describe`` and ``logs`` show workloads in a terminal.

Nomenclature: a workload's *status* is its phase (Run:ai's word) with, when
they add something, the reason and message of its last change (why it waits,
what failed); *waiting* phases are those before its pods run.

Invariants:
- the status word is never cut (``tables.fit_table``) and comes first; a
  multi-line root cause goes on its own lines under it, never in parentheses;
- a reason that repeats the phase ("Completed (Completed)") is left out, and
  so is the desired phase unless the user asked for another one than running
  (suspend: Stopped, delete: Deleted) and the workload is not there yet;
- event messages are whole, wrapped to the terminal: where the event table
  has no room for them (it would not fit, or would take more lines than the
  phrases), each event is one phrase on its own line.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ringleader.cli.common import age, wraps
from ringleader.cli.tables import Column, Output, fit_table, fits, print_data, print_table
from ringleader.runtime import modes
from ringleader.server.workload_words import WAITING, gpu_text, why_waiting

if TYPE_CHECKING:
    from ringleader.server.schemas import EventOut, PodOut, WorkloadOut

PHASE_STYLE = {
    "Running": "green",
    "Completed": "cyan",
    "Succeeded": "cyan",
    "Failed": "red",
    "Pending": "yellow",
}
INDENT = "  "


def phase_text(phase: str) -> Text:
    return Text(phase, style=PHASE_STYLE.get(phase, ""))


# ----- list -------------------------------------------------------------------------------


def list_columns(all_projects: bool) -> list[Column[WorkloadOut]]:
    """Run:ai's columns, ranked: NAME and STATUS stay; PROJECT counts more with -A."""
    return [
        Column("NAME", lambda w: w.name),
        Column("STATUS", lambda w: phase_text(w.actual_phase)),
        Column("AGE", lambda w: age(w.created_at), rank=90),
        Column("NODE", lambda w: ", ".join(w.nodes) or "-", rank=30),
        Column("IMAGE", lambda w: w.image or "-", rank=10),
        Column("TYPE", lambda w: f"{w.framework} distributed", rank=35),
        Column("PROJECT", lambda w: w.project_name, rank=85 if all_projects else 25),
        Column("USER", lambda w: w.created_by or "-", rank=20),
        Column(
            "GPUs Allocated (Requested)",
            lambda w: f"{w.allocated_gpus:g} ({w.requested_gpus:g})",
            rank=60,
            short="GPUs Allocated\n(Requested)",
        ),
        Column(
            "PODs Running (Pending)",
            lambda w: f"{w.running_pods} ({w.pending_pods})",
            rank=70,
            short="PODs Running\n(Pending)",
        ),
    ]


def print_list(
    console: Console, listing: Any, rows: Sequence[WorkloadOut], all_projects: bool, output: Any
) -> None:
    """The workloads as a table that fits (``-o wide``: every column), or as data."""
    if output in (Output.json, Output.yaml):
        print_data(listing, output)
        return
    wide = output == Output.wide
    columns = list_columns(all_projects)
    waiting = [w for w in rows if w.pending_reason]
    if waiting:  # why the scheduler left some Pending, after Run:ai's columns
        columns.append(Column("PENDING REASON", lambda w: w.pending_reason or "", 5, wrap=True))
    table, kept = fit_table(console, columns, rows, wide=wide)
    print_table(console, table, wide=wide)
    if waiting and kept[-1].header != "PENDING REASON":  # no room: under the table
        console.print()
        for w in waiting:
            for line in _wrapped(f"{w.name} is Pending: {w.pending_reason}", console.width):
                console.print(line, markup=False, highlight=False)


# ----- describe ---------------------------------------------------------------------------


def status_lines(w: WorkloadOut, width: int | None) -> list[str]:
    """``Status: PHASE[ (REASON)][  -> DESIRED]`` and the message under it, indented
    (wrapped to ``width``; None: each line whole, for a pipe)."""
    reason = w.phase_reason if w.phase_reason not in ("", w.actual_phase) else ""
    head = f"Status: {w.actual_phase}" + (f" ({reason})" if reason else "")
    # A suspend or delete on its way, or a resume waiting for a suspend's stop to end.
    if w.desired_phase != w.actual_phase and (
        w.desired_phase != "Running" or w.actual_phase == "Stopping"
    ):
        head += f"   Desired: {w.desired_phase}"
    if w.attempt:
        limit = (w.spec.get("spec") or {}).get("backoffLimit")
        head += f"   Restarts: {w.attempt}" + (f" (backoff limit {limit})" if limit else "")
    message = why_waiting(w) if w.actual_phase in WAITING else (w.pending_reason or w.phase_message)
    return [head, *_indented(message, width)] if message else [head]


def _indented(text: str, width: int | None) -> list[str]:
    """``text`` wrapped to ``width`` under a heading, each of its own lines kept."""
    if width is None:
        return [INDENT + line.rstrip() for line in text.splitlines()]
    room = max(width - len(INDENT), 20)
    out = []
    for line in text.splitlines() or [""]:
        stripped = line.rstrip()
        lead = stripped[: len(stripped) - len(stripped.lstrip())]
        out += textwrap.wrap(
            stripped.lstrip(),
            room,
            initial_indent=INDENT + lead,
            subsequent_indent=INDENT + lead + "  ",
            break_long_words=False,  # a path stays whole: the terminal wraps it
            break_on_hyphens=False,
        ) or [INDENT]
    return out


def _wrapped(text: str, width: int) -> list[str]:
    """One paragraph wrapped to ``width``, its next lines indented."""
    return textwrap.wrap(text, max(width, 20), subsequent_indent=INDENT) or [""]


def _times(w: WorkloadOut) -> str:
    """When it was made, started and ended, and how long it ran."""
    parts = [f"Created: {age(w.created_at)} ago"]
    if w.started_at:
        parts.append(f"Started: {_clock(w.started_at)}")
    if w.completed_at:
        parts.append(f"Ended: {_clock(w.completed_at)}")
        if w.started_at:
            parts[-1] += f" (ran {_duration(w.completed_at - w.started_at)})"
    return "   ".join(parts)


def _clock(stamp: datetime) -> str:
    """A UTC stamp in this machine's time: HH:MM:SS today, else the date too."""
    local = (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)).astimezone()
    today = datetime.now().astimezone().date()
    return local.strftime("%H:%M:%S" if local.date() == today else "%Y-%m-%d %H:%M:%S")


def _duration(delta: Any) -> str:
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def print_describe(
    console: Console,
    w: WorkloadOut,
    pods: list[PodOut],
    events: list[EventOut],
    output: Any,
) -> None:
    """A workload whole: who and what, its status, pods and events."""
    if output in (Output.json, Output.yaml):
        split = None if w.actual_phase in WAITING else _fetch_split(w)
        print_data({**w.model_dump(mode="json", by_alias=True), "pods": pods, "events": events,
                    "stepSplit": split}, output)  # fmt: skip
        return
    wide = output == Output.wide
    spec = w.spec["spec"]  # the stored WorkloadSpec, as submitted (camelCase)
    wrap = wraps(console)  # a pipe gets each line whole, for grep
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=not wrap)  # noqa: E731
    say(f"Name: {w.name}   Id: {w.workload_id}")
    say(f"Project: {w.project_name}   Type: {w.framework} distributed   User: {w.created_by}")
    if w.backend:
        say(f"Backend: {w.backend}" + (f"   {w.backend_ref}" if w.backend_ref else ""))
    for line in status_lines(w, console.width if wrap else None):  # wrapped already
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    say(_times(w))
    say(f"Command: {spec.get('command', '')} {spec.get('args', '')}".rstrip())
    say(
        f"Workers: {spec['numWorkers']}   Image: {spec.get('image') or '-'}   "
        f"Working dir: {spec.get('workingDir') or '-'}   "
        f"Backoff limit: {spec.get('backoffLimit', 6)}"
    )
    if spec.get("compute"):
        say("Compute: " + ", ".join(f"{k}={v}" for k, v in spec["compute"].items()))
    say(
        f"GPUs: {w.allocated_gpus:g} allocated of {w.requested_gpus:g} requested"
        + (f"   Nodes: {', '.join(w.nodes)}" if w.nodes else "")
    )
    if spec.get("gradCompression") or spec.get("syncEvery"):
        try:
            words = modes.make_mode(spec.get("gradCompression"), spec.get("syncEvery")).describe()
        except ValueError:  # stored before a check existed: shown as stored
            words = f"{spec.get('gradCompression')}, sync every {spec.get('syncEvery')}"
        say(f"Communication: {words}")
    if w.actual_phase not in WAITING and (line := step_split_line(_fetch_split(w))):
        say(line)
    console.print()
    if pods:
        table, _ = fit_table(console, pod_columns(), pods, wide=wide, title="Pods")
        print_table(console, table, wide=wide)
    else:
        say("Pods: none yet" + (" (it waits to be scheduled)" if w.actual_phase in WAITING else ""))
    console.print()
    print_events(console, w.name, events, wide=wide)


def _ms(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1000:.0f} ms"


def step_split_line(split: dict[str, Any] | None) -> str | None:
    """'Step time: 120 ms: compute 70 ms, communication 50 ms (network-bound, ...)'
    from the metrics' ``stepSplit`` (None: no rank's model was timed)."""
    if not split:
        return None
    ranks = split["ranks"]
    return (
        f"Step time: {_ms(split['stepTime'])}: compute {_ms(split['computeTime'])}, "
        f"communication {_ms(split['commTime'])} ({split['bound']}-bound; the mean of "
        f"{ranks} rank{'' if ranks == 1 else 's'}' latest steps)"
    )


def _fetch_split(w: WorkloadOut) -> dict[str, Any] | None:
    """The server's ``stepSplit`` for ``w``; None when it has none or cannot say now
    (describe never fails for it).  ``since`` at its bound: no points, only the summary."""
    import httpx

    from ringleader.cli.common import client
    from ringleader.errors import RingleaderError

    path = f"/api/v1/workloads/{w.workload_id}/metrics"
    try:
        body = client(autostart=False).request("GET", path, params={"since": 1e11}).json()
    except (RingleaderError, httpx.HTTPError, ValueError):
        return None
    split = body.get("stepSplit") if isinstance(body, dict) else None
    return split if isinstance(split, dict) else None


def pod_columns() -> list[Column[PodOut]]:
    return [
        Column("POD", lambda p: p.name),
        Column("ROLE", lambda p: p.role, rank=60),
        Column("STATUS", lambda p: phase_text(p.status)),
        Column("NODE", lambda p: p.node or "-", rank=50),
        Column("GPUs", lambda p: gpu_text(p.gpus), rank=45),
        Column("EXIT CODE", lambda p: "-" if p.exit_code is None else str(p.exit_code), 70),
        Column("ATTEMPT", lambda p: str(p.attempt), rank=30),
        Column("RANKS", lambda p: ",".join(map(str, p.ranks)) or "-", rank=40),
        Column("PEAK MEMORY", lambda p: _size(p.peak_memory_bytes), rank=20, short="PEAK\nMEMORY"),
        Column("CPU TIME", lambda p: _seconds(p.cpu_seconds), rank=15, short="CPU\nTIME"),
        Column("ISOLATION", lambda p: p.isolation or "-", rank=10),
    ]


def _size(n: int | None) -> str:
    """1536 -> "1.5KiB": a measured size, binary units."""
    if n is None:
        return "-"
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def event_columns() -> list[Column[EventOut]]:
    return [
        Column("TIME", lambda e: _clock(e.time)),
        Column("TYPE", lambda e: e.type),
        Column("POD", lambda e: e.pod_name or ""),
        Column("FROM", lambda e: e.from_phase or ""),
        Column("TO", lambda e: e.to_phase or ""),
        Column("REASON", lambda e: e.reason),
        Column("MESSAGE", lambda e: Text(e.message), wrap=True),
    ]


def print_events(console: Console, name: str, events: list[EventOut], *, wide: bool) -> None:
    """Events as a table where its messages have room, else one phrase per event.

    "Room" is measured, not guessed: a table that fits but squeezes its MESSAGE
    column (a root cause wrapped over 5-9 lines beside six short columns) takes
    more lines than the phrases would, so the phrases are shown instead.
    """
    table, _ = fit_table(console, event_columns(), events, wide=wide, title="Events")
    compact = Table(box=None, title="Events", title_justify="left", title_style="bold")
    compact.add_column("TIME", no_wrap=True)
    compact.add_column("EVENT", overflow="fold")
    for e in events:
        compact.add_row(_clock(e.time), event_phrase(e, name))
    if wide or (fits(console, table) and _lines(console, table) <= _lines(console, compact)):
        print_table(console, table, wide=wide)
        return
    console.print(compact)


def _lines(console: Console, table: Table) -> int:
    """How many lines ``table`` takes at ``console``'s width."""
    return len(console.render_lines(table, console.options, pad=False))


def event_phrase(e: EventOut, workload: str) -> str:
    """One event in words: ``worker-0: Pending -> Failed (reason): message``."""
    pod = e.pod_name or ""
    pod = pod.removeprefix(f"{workload}-")
    if (e.from_phase or e.to_phase) and e.from_phase != e.to_phase:
        words = f"{e.from_phase or '?'} -> {e.to_phase or '?'}"
        if e.type not in ("PhaseChanged", "PodPhaseChanged"):
            words = f"{e.type} {words}"
    else:
        words = e.type
    if pod:
        words = f"{pod}: {words}"
    if e.reason and e.reason not in (e.type, e.to_phase):
        words += f" ({e.reason})"
    if e.message:
        words += ("\n" if "\n" in e.message else ": ") + e.message
    return words

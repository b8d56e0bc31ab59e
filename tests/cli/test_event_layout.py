"""describe's events: a table only where its MESSAGE column has room; a root cause is
never squeezed over many lines beside six short columns (a new user saw 5-9)."""

from __future__ import annotations

import io
from datetime import datetime, timezone

from rich.console import Console

from ringleader.cli.show import print_events
from ringleader.server.schemas import EventOut

T = datetime(2026, 11, 29, 10, 0, tzinfo=timezone.utc)
CAUSE = (
    "rank 1 (pod mnist-worker-0 on node local) exited with code 1: RuntimeError: CUDA out"
    " of memory while allocating the activations of layer 12; the first failure of the gang"
)
EVENTS = [
    EventOut(id="1", time=T, type="PodPhaseChanged", pod_name="mnist-worker-0",
             from_phase="Running", to_phase="Failed", reason="Error", message=CAUSE),
    EventOut(id="2", time=T, type="PhaseChanged", from_phase="Running", to_phase="Failed",
             reason="BackoffLimitExceeded", message="the gang failed 7 times; not restarted"),
    EventOut(id="3", time=T, type="Scheduled", message="placed on local"),
]  # fmt: skip


def _shown(width: int, events: list[EventOut] = EVENTS, wide: bool = False) -> str:
    out = io.StringIO()
    print_events(Console(file=out, width=width), "mnist", events, wide=wide)
    return out.getvalue()


def _cause_lines(text: str) -> int:
    """Lines from the one holding the cause's first words to the one holding its last."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if "rank 1 (pod" in line)
    last = next(i for i, line in enumerate(lines) if line.rstrip().endswith("gang"))
    return last - first + 1


def test_a_long_message_is_never_squeezed_into_a_narrow_column() -> None:
    for width in range(80, 260, 10):
        shown = _shown(width)
        whole = " ".join(shown.split())
        assert " ".join(CAUSE.split()) in whole, (width, shown)  # whole, never cut
        # as few lines as the message needs at this width, give or take one
        needed = -(-len(CAUSE) // (width - 12))
        assert _cause_lines(shown) <= needed + 1, (width, shown)


def test_short_messages_keep_the_table_with_its_columns() -> None:
    short = [EventOut(id="1", time=T, type="PodPhaseChanged", pod_name="mnist-worker-0",
                      from_phase="Pending", to_phase="Running", reason="Started",
                      message="on local")]  # fmt: skip
    shown = _shown(120, short)
    assert "REASON" in shown and "MESSAGE" in shown and "worker-0" in shown, shown


def test_wide_output_is_always_the_table() -> None:
    shown = _shown(80, wide=True)
    assert "MESSAGE" in shown and "BackoffLimitExceeded" in shown

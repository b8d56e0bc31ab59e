"""A workload page's logs: new lines since a cursor (live), and the whole text (download).

Both read through ``services.logs.log_text``, the API's ``/logs`` path: the
same visibility (404 for another project's workload), the same ``pod`` names
(``worker-1`` or the full name) and ``since``, and the same merged order.

The cursor is what ``log_text`` counts to send a line once while following:
the lines read per (pod, attempt, stream), as compact JSON the page sends
back.  A poll returns at most ``MAX_LINES`` lines (the newest; the answer says
how many it skipped: the download has them all), so an answer is bounded
however much a run printed between two polls.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session

from ringleader.errors import InvalidSpec
from ringleader.server.deps import get_session
from ringleader.server.models import User
from ringleader.server.services.logs import log_text
from ringleader.server.services.workloads import get
from ringleader.server.ui.session import ui_user

router = APIRouter(include_in_schema=False)

MAX_LINES = 1000  # lines per poll
MAX_CURSOR_CHARS = 16_384
_LINE = re.compile(r"^\[([^\]]*)\] (.*)$", re.DOTALL)

Cursor = dict[tuple[str, int, str], int]


def parse_cursor(text: str | None) -> Cursor:
    """The page's cursor back: ``[[pod, attempt, stream, count], ...]``; bad -> 400."""
    if not text:
        return {}
    try:
        items = json.loads(text)
        cursor = {
            (str(pod), int(attempt), str(stream)): int(count)
            for pod, attempt, stream, count in items
        }
    except (ValueError, TypeError):
        raise InvalidSpec("expected the cursor this page was given", "cursor") from None
    if any(count < 0 for count in cursor.values()):
        raise InvalidSpec("expected the cursor this page was given", "cursor")
    return cursor


def dump_cursor(cursor: Cursor) -> str:
    return json.dumps(
        [[*key, count] for key, count in sorted(cursor.items())], separators=(",", ":")
    )


def split_line(text: str) -> dict[str, str]:
    """``[pod] text`` -> {"pod", "text"} (the page filters and colours by pod)."""
    match = _LINE.match(text.rstrip("\n"))
    if match is None:
        return {"pod": "", "text": text.rstrip("\n")}
    return {"pod": match.group(1), "text": match.group(2)}


@router.get("/workloads/{workload_id}/logs/live")
def live_logs(
    workload_id: str,
    request: Request,
    pod: str | None = Query(None, max_length=300),
    cursor: str | None = Query(None, max_length=MAX_CURSOR_CHARS),
    user: User = Depends(ui_user),
    s: Session = Depends(get_session),
) -> dict[str, Any]:
    """The lines after ``cursor`` (all pods merged, or ``pod``'s), at most ``MAX_LINES``."""
    seen = parse_cursor(cursor)
    before = sum(seen.values())
    state = request.app.state
    lines = list(
        log_text(
            s,
            user,
            workload_id,
            backends=state.backends,
            readers=state.readers,
            pod=pod or None,
            tail=MAX_LINES,
            seen=seen,
        )
    )
    read = sum(seen.values()) - before
    return {
        "lines": [split_line(line) for line in lines],
        "skipped": max(0, read - len(lines)),
        "cursor": dump_cursor(seen),
    }


@router.get("/workloads/{workload_id}/logs/download")
def download_logs(
    workload_id: str,
    request: Request,
    pod: str | None = Query(None, max_length=300),
    timestamps: bool = False,
    user: User = Depends(ui_user),
    s: Session = Depends(get_session),
) -> StreamingResponse:
    """Every line as plain text, saved as ``NAME.log`` or ``NAME-POD.log``."""
    name = get(s, user, workload_id).name
    state = request.app.state
    lines = log_text(
        s,
        user,
        workload_id,
        backends=state.backends,
        readers=state.readers,
        pod=pod or None,
        timestamps=timestamps,
        stopping=state.stopping,
    )
    stem = name if not pod else pod if pod.startswith(f"{name}-") else f"{name}-{pod}"
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)
    return StreamingResponse(
        lines,
        media_type="text/plain; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{stem}.log"',
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )

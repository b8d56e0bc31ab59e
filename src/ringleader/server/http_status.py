"""The one table from ringleader's errors to HTTP statuses, for every route and socket.

Why one: the API's error handler (``app.py``) and the exec socket's final status
(``routers/exec.py``) each kept a list, and an error added to one was a 400 or a
409 in the other.  ``errors.HTTP_STATUS`` is the client-side half (what the CLI
reads back); the server adds its own errors here.
"""

from __future__ import annotations

from ringleader.errors import HTTP_STATUS, RingleaderError
from ringleader.server.phases import IllegalTransition

# IllegalTransition is a race or a bug, never input: a conflict with what just happened.
STATUS: list[tuple[type[RingleaderError], int]] = [
    *HTTP_STATUS.items(),
    (IllegalTransition, 409),
]


def status_of(exc: RingleaderError, default: int = 400) -> int:
    """The HTTP status ``exc`` answers with (``default`` for one the table lacks)."""
    return next((code for kind, code in STATUS if isinstance(exc, kind)), default)

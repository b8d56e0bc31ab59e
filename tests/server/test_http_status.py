"""One error-to-HTTP table for the API and the exec socket (``server/http_status.py``)."""

from __future__ import annotations

from ringleader.errors import (
    Conflict,
    Forbidden,
    InvalidSpec,
    NotFound,
    RingleaderError,
    TooManyRequests,
    Unauthorized,
)
from ringleader.server.http_status import status_of
from ringleader.server.phases import IllegalTransition
from ringleader.server.ratelimit import RateLimited


def test_every_error_answers_the_same_status_wherever_it_is_raised() -> None:
    assert status_of(Unauthorized("x")) == 401
    assert status_of(Forbidden("x")) == 403
    assert status_of(NotFound("workload", "x")) == 404
    assert status_of(Conflict("x")) == 409
    assert status_of(InvalidSpec("bad", "spec.name")) == 422
    assert status_of(TooManyRequests("x")) == 429
    assert status_of(RateLimited("x", 3)) == 429  # a subclass: its parent's status
    assert status_of(IllegalTransition("Running", "Creating", "w")) == 409
    assert status_of(RingleaderError("x")) == 400
    assert status_of(RingleaderError("x"), default=409) == 409  # the exec socket's


def test_the_exec_socket_and_the_api_read_the_same_table() -> None:
    from ringleader.server import app
    from ringleader.server.routers import exec as exec_router

    assert app.status_of is status_of and exec_router.status_of is status_of

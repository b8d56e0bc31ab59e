"""422s that cost little whatever was sent: bounded, built off the event loop.

Nomenclature: an *error* is one of pydantic's (``loc``, ``msg``, ``type``,
``input``, ``ctx``); its *echo* is the ``input`` (and ``ctx``) sent back.

Invariants (issue 22, item 5):
- a 422 lists at most ``MAX_ERRORS`` errors and says how many there were; every
  echo is small (strings cut, objects and lists to their first items and a few
  levels) and renderable (inf, NaN, lone surrogates); a secret-named field's value
  is never echoed;
- a request body (past ``limits.ON_LOOP_BODY_BYTES``) is validated against its
  route's model in a worker thread first
  (``body_checked_off_loop``), on the JSON ``limits.JsonBounds`` parsed there:
  a body that fails gets its 422 without FastAPI's own validation, which runs on
  the event loop, ever seeing it; a body that passes is validated again by
  FastAPI (bounded: it passed the model's own limits); a route that asks for its
  caller checks the caller first, as it would have (401, 403 before a 422);
- the work is bounded by ``limits.JsonBounds``' shape bound above all: the JSON
  parser and pydantic's core hold the GIL, so a worker thread alone would not
  give the loop its turn during them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from itertools import islice
from typing import Any

import anyio
from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.params import Form
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.requests import HTTPConnection

from ringleader.errors import Unauthorized
from ringleader.server.deps import MISSING_TOKEN, caller, current_user, verified_caller
from ringleader.server.limits import BODY_BYTES, ON_LOOP_BODY_BYTES, PARSED_BODY

_ECHO_CHARS = 200  # of an input echoed in a 422: enough to recognise it
_ECHO_ITEMS = 10  # of an object or list echoed in a 422; deeper than _ECHO_DEPTH: none
_ECHO_DEPTH = 3
MAX_ERRORS = 20  # a 422 lists the first of its errors, and says how many there were


def _finite(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON can carry it, and small: inf and NaN (JSON has neither) as
    strings ("inf", "nan"), a lone surrogate (no UTF-8 encoder writes one) escaped as
    ``\\ud800``, a long string cut to its start, an object or list to its first
    ``_ECHO_ITEMS`` items and ``_ECHO_DEPTH`` levels (the rest as "...")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (bytes, bytearray)):  # a raw body (no JSON content type)
        return f"<{len(value)} bytes, not shown>"  # may hold a secret: never echoed
    if isinstance(value, str):
        cut = value if len(value) <= _ECHO_CHARS else value[:_ECHO_CHARS] + "..."
        return cut.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, (dict, list, tuple)) and depth >= _ECHO_DEPTH:
        return "..."
    if isinstance(value, dict):
        items = list(islice(value.items(), _ECHO_ITEMS))
        shown = {_finite(key, depth + 1): _finite(item, depth + 1) for key, item in items}
        if len(value) > _ECHO_ITEMS:
            shown["..."] = f"{len(value) - _ECHO_ITEMS} more keys"
        return shown
    if isinstance(value, (list, tuple)):
        head = [_finite(item, depth + 1) for item in islice(value, _ECHO_ITEMS)]
        more = len(value) - _ECHO_ITEMS
        return head + ([f"... {more} more items"] if more > 0 else [])
    return value


def _small(error: dict[str, Any]) -> dict[str, Any]:
    """One of pydantic's errors with every part made small by ``_finite``: its
    ``loc`` part by part (a loc may be deep), its ``input`` and ``ctx`` whole."""
    shown = {key: _finite(item) for key, item in error.items() if key != "loc"}
    if "loc" in error:
        shown["loc"] = [_finite(part) for part in error["loc"]]
    return shown


# A field whose name says it holds a secret (clientSecret, AppSecret, password,
# refreshToken ...) is never echoed in a 422, on any route, at any depth.
SECRET_NAME = re.compile(r"secret|password|token", re.IGNORECASE)
REDACTED = "<redacted>"


def _redacted(value: Any) -> Any:
    """``value`` with what any secret-named key holds replaced, at every depth."""
    if isinstance(value, dict):
        return {
            key: REDACTED if SECRET_NAME.search(str(key)) else _redacted(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_redacted(item) for item in value]
    return value


def _unechoed(error: dict[str, Any]) -> dict[str, Any]:
    """The error without its input where the input is a secret (its field's name,
    or a parent's, says so), and with the secrets inside a body's input redacted."""
    if any(SECRET_NAME.search(str(part)) for part in error.get("loc") or ()):
        return {key: item for key, item in error.items() if key != "input"}
    if "input" in error:
        return {**error, "input": _redacted(error["input"])}
    return error


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's own 422, except that it is bounded and built off the event loop: the
    first ``MAX_ERRORS`` errors (and a ``message`` saying how many there were), each
    input echoed small and renderable (``_finite``: FastAPI's response would fail to
    render inf, NaN or a lone surrogate and answer 500, and would echo a megabyte
    back), a secret not at all.  A body that is no JSON gets a ``message`` naming its
    line and column (FastAPI gives a character offset)."""
    raw = await request.body()
    content = await anyio.to_thread.run_sync(validation_content, exc.errors(), raw)
    return JSONResponse(content, status_code=422)


def validation_content(every: Sequence[Any], raw: bytes) -> dict[str, Any]:
    """The 422's body for ``every`` error (work that grows with them: in a thread)."""
    first = list(islice(every, MAX_ERRORS))
    errors = [_unechoed(error) for error in jsonable_encoder([_small(e) for e in first])]
    content: dict[str, Any] = {"detail": errors}
    broken = next((e for e in first if e.get("type") == "json_invalid"), None)
    if broken is not None:
        content["message"] = _json_position(raw, broken)
    elif len(every) > MAX_ERRORS:
        content["message"] = f"{len(every)} errors; the first {MAX_ERRORS} are listed"
    return content


def _json_position(raw: bytes, error: dict[str, Any]) -> str:
    """The 422 message for a body JSON cannot read: its line, column and the problem."""
    where = error.get("loc", ())
    offset = where[1] if len(where) > 1 and isinstance(where[1], int) else len(raw)
    before = raw[:offset].decode("utf-8", errors="replace")
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    problem = str((error.get("ctx") or {}).get("error") or error.get("msg") or "")[:200]
    return f"the request body is not valid JSON: line {line}, column {column}: {problem}"


VALIDATION_THREADS = 2  # bodies validated at once, on threads of their own


async def body_checked_off_loop(connection: HTTPConnection) -> None:
    """An app-wide dependency: the route's body model checks the body (parsed by
    ``limits.JsonBounds`` in its thread) on a worker thread, before FastAPI's own
    validation, which runs on the event loop: a body that fails is refused here
    (``validation_error`` renders it), so that validation only ever sees bodies that pass.

    Dependencies are solved before the body is validated, and the matched route is
    in the scope; a route whose body is embedded or a form is left to FastAPI, and
    so is a small body (``limits.ON_LOOP_BODY_BYTES``: a few hundred values at most,
    whose validation costs the loop less than a thread's round trip; FastAPI solves
    the route's dependencies, its caller's check among them, before it looks at it)."""
    scope = connection.scope
    route, value = scope.get("route"), scope.get(PARSED_BODY, _NONE)
    if value is _NONE or scope["type"] != "http" or not isinstance(route, APIRoute):
        return
    if scope.get(BODY_BYTES, ON_LOOP_BODY_BYTES + 1) <= ON_LOOP_BODY_BYTES:
        return
    bodies = route.dependant.body_params
    if len(bodies) != 1 or isinstance(bodies[0].field_info, Form):
        return
    if getattr(bodies[0].field_info, "embed", None):
        return
    state = connection.app.state
    threads = getattr(state, "validation_threads", None)
    if threads is None:
        threads = state.validation_threads = anyio.CapacityLimiter(VALIDATION_THREADS)
    errors = await anyio.to_thread.run_sync(_errors, bodies[0], value, limiter=threads)
    if errors:
        if _needs_caller(route.dependant):  # 401/403 before anything about the body
            await anyio.to_thread.run_sync(_authorize, connection, limiter=threads)
        raise RequestValidationError(errors)


def _needs_caller(dependant: Any) -> bool:
    """Whether the route asks for its caller (``deps.current_user`` or
    ``deps.verified_caller``) anywhere."""
    return any(
        d.call in (current_user, verified_caller) or _needs_caller(d)
        for d in dependant.dependencies
    )


def _authorize(connection: HTTPConnection) -> None:
    """What ``deps.current_user`` would decide for this request: raises 401 or 403."""
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized(MISSING_TOKEN)
    with connection.app.state.readers() as session:
        caller(connection.scope, token.strip(), session)


_NONE = object()


def _errors(field: Any, value: Any) -> list[dict[str, Any]]:
    """What FastAPI's own check of ``value`` against ``field`` would find."""
    return list(field.validate(value, {}, loc=("body",))[1])

"""Turning the API's error answers into ringleader's typed errors, for ``client``.

The server raises ``errors.py``'s classes and answers with their HTTP status;
``error_for`` maps a status back to the same class, so a caller catches
``NotFound`` or ``Conflict`` whether it runs in the server or talks to one.
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from ringleader.errors import HTTP_STATUS, ApiError, InvalidSpec, RingleaderError

# Each status the API answers with, as the typed error the server raised; any other is ApiError.
ERRORS: dict[int, type[RingleaderError]] = {status: kind for kind, status in HTTP_STATUS.items()}


def error_for(response: httpx.Response) -> RingleaderError:
    """The typed error an HTTP error response stands for, with the server's message.

    A 422 names the field: its ``where`` is the first ``loc`` of FastAPI's
    ``detail`` (``spec.numWorkers``), and ``fields`` lists every (field, problem).
    """
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"message": response.text.strip() or response.reason_phrase}
    detail = body.get("detail")
    fields = _fields(detail) if isinstance(detail, list) else []
    listed = "; ".join(f"{where}: {problem}" if where else problem for where, problem in fields)
    message = str(body.get("message") or listed or detail or response.reason_phrase)
    kind = ERRORS.get(status)
    if kind is None:
        return ApiError(status, f"HTTP {status}: {message}")
    error = kind.from_server(message, status)
    if isinstance(error, InvalidSpec):
        error.where, error.problem = fields[0] if fields else (None, message)
        error.fields = fields or [(None, message)]
    return error


def _fields(detail: list[Any]) -> list[tuple[str | None, str]]:
    """(dotted field path, message) of each entry of FastAPI's validation ``detail``."""
    out = []
    for entry in detail:
        if not isinstance(entry, dict):
            continue
        loc = [str(part) for part in entry.get("loc") or [] if part != "body"]
        out.append((".".join(loc) or None, str(entry.get("msg", ""))))
    return out


def unreachable_detail(exc: Exception) -> str:
    """What went wrong reaching a server, in words: httpx's and the OS's messages
    without their class names and errno numbers."""
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return f"not a usable URL ({exc})"
    if isinstance(exc, httpx.ConnectTimeout):
        return "it did not accept the connection in time"
    if isinstance(exc, httpx.TimeoutException):
        return "it did not answer in time"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the connection closed without a complete answer (the server stopped?)"
    text = re.sub(r"\[Errno -?\d+\]\s*", "", str(exc)).strip() or type(exc).__name__
    return text[:1].lower() + text[1:]


def raise_for(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise error_for(response)


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a 429 asks to wait (its Retry-After), else None."""
    if response.status_code != 429:
        return None
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None

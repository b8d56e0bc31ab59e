"""Typed errors shared by the launcher, the CLI, the client and the server.

Each error carries enough to tell the user what is wrong and where: a field
name, a ``file:line``, a host.  The CLI maps them to exit codes once
(``exit_code``), so no caller invents its own; the server maps them to HTTP
statuses once (``server/app.py``), and the client maps statuses back
(``client_errors.error_for``), so the same class is raised on both sides of the wire.

Exit codes by kind (docs/control-plane.md's table is this one): 1 any other error, 2
bad input or usage, 3 an SSH host unusable, 4 not found, 5 conflict, 6 not
logged in or not allowed, 7 no server answers, 8 the server is busy (retry),
130 interrupted (Ctrl-C).
"""

from __future__ import annotations

from typing import TypeVar

E = TypeVar("E", bound="RingleaderError")


class RingleaderError(Exception):
    """Base of every error ringleader raises on purpose."""

    exit_code: int = 1
    status: int | None = None  # the HTTP status, when the error came back from the server

    @classmethod
    def from_server(cls: type[E], message: str, status: int) -> E:
        """The error as the client rebuilds it from a response.

        The server already wrote the whole message (naming what is missing or
        wrong), so this skips the subclass's own ``__init__``, which would build
        the message again from parts the response does not carry.
        """
        error = cls.__new__(cls)
        Exception.__init__(error, message)
        error.status = status
        return error


class InvalidSpec(RingleaderError):
    """User input is malformed: a hostfile line, a flag, a field.

    ``where`` is a ``file:line`` or a field name, so the message can point
    at the exact thing to fix.
    """

    exit_code = 2
    problem: str
    where: str | None
    # Every (field, problem) when the server named several; the first is (where, problem).
    fields: list[tuple[str | None, str]]

    def __init__(self, problem: str, where: str | None = None) -> None:
        self.problem = problem
        self.where = where
        self.fields = [(where, problem)]
        super().__init__(f"{where}: {problem}" if where else problem)


class HostUnreachable(RingleaderError):
    """A host could not be used: DNS, connect, auth, host key, or setup.

    ``stage`` names what failed so the user knows which fix applies.
    """

    exit_code = 3

    def __init__(self, host: str, stage: str, detail: str, fix: str = "") -> None:
        self.host = host
        self.stage = stage
        self.detail = detail
        self.fix = fix
        text = f"host {host}: {stage} failed: {detail}"
        super().__init__(text + (f"\n  fix: {fix}" if fix else ""))


class NotFound(RingleaderError):
    """The thing named does not exist (or the caller may not see it)."""

    exit_code = 4

    def __init__(self, kind: str, key: str) -> None:
        self.kind = kind
        self.key = key
        super().__init__(f"{kind} {key!r} not found")


class Conflict(RingleaderError):
    """The request clashes with what exists (a duplicate name, a wrong phase)."""

    exit_code = 5


class Unauthorized(RingleaderError):
    """No valid credentials: missing, wrong or expired token or secret."""

    exit_code = 6


class Forbidden(RingleaderError):
    """Authenticated, but not allowed (e.g. quotas are set by admins only)."""

    exit_code = 6


class PayloadTooLarge(RingleaderError):
    """A request body over the server's size bound (HTTP 413)."""

    exit_code = 2


class TooManyRequests(RingleaderError):
    """The server sheds load or rate-limits this caller (HTTP 429); retry later."""

    exit_code = 8


class ServerUnreachable(RingleaderError):
    """No ringleader server answers at the URL the client uses (refused, no such
    host, timed out, a bad URL, or the connection broke).

    ``source`` says where the URL came from (``RINGLEADER_URL``, a login's
    config...), because the fix depends on it: start a server there, or point
    the client at the one that runs.
    """

    exit_code = 7

    def __init__(
        self, url: str, detail: str, source: str | None = None, fix: str | None = None
    ) -> None:
        self.url = url
        self.detail = detail
        self.source = source
        origin = f" (from {source})" if source else ""
        super().__init__(
            f"cannot reach the ringleader server at {url}{origin}: {detail}\n"
            f"  fix: {fix or unreachable_fix(url, source)}"
        )


def unreachable_fix(url: str, source: str | None) -> str:
    """What to do when nothing answers at ``url``: start a server there if it is
    this machine's, or point the client at the server that runs."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        parts, host, port = None, None, None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        return "give a URL like http://HOST:8470 (RINGLEADER_URL or `ringleader login --url`)"
    from ringleader.defaults import DEFAULT_PORT

    start = "`ringleader server" + (f" --port {port}`" if port and port != DEFAULT_PORT else "`")
    if source == "RINGLEADER_URL":
        if host in ("127.0.0.1", "localhost", "::1"):
            return (
                f"start it with {start} in another shell, or unset RINGLEADER_URL "
                "to use this home's server"
            )
        return "check that its server runs and the address is right, or set RINGLEADER_URL"
    if source and "login" in source:
        return (
            "check that its server runs, or point to another: `ringleader login --url URL` "
            "or RINGLEADER_URL=URL"
        )
    return f"start one with {start} in another shell, or set RINGLEADER_URL=http://HOST:PORT"


class ApiError(RingleaderError):
    """Any other HTTP error from the server (a 5xx, an unexpected 4xx): its status and text."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# The HTTP status each typed error is answered with: the server maps errors to
# statuses with it, and the client maps statuses back to the same classes.
HTTP_STATUS: dict[type[RingleaderError], int] = {
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    PayloadTooLarge: 413,
    InvalidSpec: 422,
    TooManyRequests: 429,
}

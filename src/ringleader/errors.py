"""Typed errors shared by the launcher, the CLI and (later) the server.

Each error carries enough to tell the user what is wrong and where: a field
name, a ``file:line``, a host.  The CLI maps them to exit codes once
(``exit_code``), so no caller invents its own.
"""

from __future__ import annotations


class RingleaderError(Exception):
    """Base of every error ringleader raises on purpose."""

    exit_code: int = 1


class InvalidSpec(RingleaderError):
    """User input is malformed: a hostfile line, a flag, a field.

    ``where`` is a ``file:line`` or a field name, so the message can point
    at the exact thing to fix.
    """

    exit_code = 2

    def __init__(self, problem: str, where: str | None = None) -> None:
        self.problem = problem
        self.where = where
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


class QuotaExceeded(RingleaderError):
    """The request would exceed a project's or department's limit."""

    exit_code = 7

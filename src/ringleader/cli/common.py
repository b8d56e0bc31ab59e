"""What CLI commands share: the client, error reporting, time formatting."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console

from ringleader.errors import RingleaderError

if TYPE_CHECKING:
    from ringleader.client import Client

# Piped output (scripts, tests) gets full-width tables instead of a truncated 80 columns.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 250)
err_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 250)
F = TypeVar("F", bound=Callable[..., Any])


def client(autostart: bool = True) -> Client:
    """The client of this home's server (started in the background if none runs)."""
    from ringleader.client import Client

    return Client.connect(autostart=autostart)


def reports_errors(fn: F) -> F:
    """Typed errors become one clear line on stderr and their exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RingleaderError as exc:
            err_console.print(f"[red]error:[/red] {exc}", markup=True, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None

    return wrapper  # type: ignore[return-value]


def age(stamp: datetime | str | None) -> str:
    """How long ago, as ``kubectl get`` says it: 42s, 5m, 3h, 2d."""
    if not stamp:
        return "-"
    then = stamp if isinstance(stamp, datetime) else datetime.fromisoformat(stamp)
    if then.tzinfo is None:  # the API's datetimes are UTC
        then = then.replace(tzinfo=timezone.utc)
    seconds = int((datetime.now(timezone.utc) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"

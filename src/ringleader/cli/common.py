"""What CLI commands share: the client, error reporting, time formatting."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, TypeVar

import typer
from rich.console import Console

from ringleader.errors import RingleaderError

# Piped output (scripts, tests) gets full-width tables instead of a truncated 80 columns.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 250)
err_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 250)
F = TypeVar("F", bound=Callable[..., Any])


def client(autostart: bool = True) -> Any:
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


def age(stamp: str | None) -> str:
    if not stamp:
        return "-"
    then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    seconds = int((datetime.now(timezone.utc) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"

"""What CLI commands share: the client, error reporting, output width, time formatting.

Invariants of error reporting (``reports_errors``, on every command that
talks to a server, and ``usage_error`` for what click finds wrong in a command
line, for every command):
- an error is one line (``error: ...``), or two when a second says what to do
  (``  fix: ...``), on stderr; never a traceback, unless ``RINGLEADER_DEBUG=1``
  asks for one;
- the exit code says the kind (``errors.py``, docs/control-plane.md's table): 2 bad
  input, 4 not found, 5 conflict, 6 not allowed, 7 no server answers ...;
  an error nobody foresaw (a bug) is 1, and Ctrl-C is 130.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from ringleader.errors import (
    ApiError,
    Forbidden,
    InvalidSpec,
    NotFound,
    RingleaderError,
    TooManyRequests,
    Unauthorized,
)

if TYPE_CHECKING:
    from ringleader.client import Client

PIPE_WIDTH = 250  # piped output (scripts, tests): full rows, not a terminal's 80 columns
INTERRUPTED = 130  # what a shell reports for a command ended by Ctrl-C (128 + SIGINT)
DEBUG_VAR = "RINGLEADER_DEBUG"  # set: an unforeseen error shows its traceback


def output_width(stream: TextIO) -> int | None:
    """The width to print for: ``COLUMNS`` when set (as a terminal or a user says), else
    the terminal's (None: rich asks it), else ``PIPE_WIDTH`` for a pipe or a file."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if stream.isatty() else PIPE_WIDTH


def wraps(console: Console) -> bool:
    """Text is wrapped to the width: on a terminal, or when ``COLUMNS`` says one; a pipe
    gets each line whole (tables are still laid out at ``PIPE_WIDTH``)."""
    return console.is_terminal or os.environ.get("COLUMNS", "").isdigit()


console = Console(highlight=False, width=output_width(sys.stdout))
err_console = Console(stderr=True, highlight=False, width=output_width(sys.stderr))
F = TypeVar("F", bound=Callable[..., Any])


def client(autostart: bool = True) -> Client:
    """The client of this home's server (started in the background if none runs)."""
    from ringleader.client import Client

    return Client.connect(autostart=autostart)


# What to do about a typed error whose message does not say it already (no second line).
_NOT_FOUND_FIX = {
    "workload": "`ringleader list -A` lists the workloads you can see",
    "project": "`ringleader project list` lists the projects you can use",
    "node": "`ringleader nodes list` lists the nodes",
    "user": "`ringleader user list` lists the users (admins)",
    "access": "`ringleader access-key list` lists your access keys",
}


def fix_for(exc: RingleaderError) -> str | None:
    """The ``fix:`` line for ``exc``, when its kind suggests one and it has none."""
    text = str(exc)
    if "\n" in text:
        return None
    if isinstance(exc, NotFound):
        return _NOT_FOUND_FIX.get(text.split(" ", 1)[0].lower())
    if isinstance(exc, Unauthorized) and "login" not in text:
        return (
            "`ringleader login` with your access key (an admin creates one: "
            "`ringleader user create`), or set RINGLEADER_CLIENT_ID/RINGLEADER_CLIENT_SECRET"
        )
    if isinstance(exc, Forbidden):
        return "ask an admin of the project, or a global admin, to do it or to give you the role"
    if isinstance(exc, TooManyRequests):
        return "the server is busy: try again in a few seconds"
    if isinstance(exc, InvalidSpec):
        command = _command_path()
        return f"`{command} --help` lists the options and their forms" if command else None
    if isinstance(exc, ApiError) and (exc.status or 0) >= 500:
        return "the server failed to answer; its log says why (server.log in its data directory)"
    return None


def _command_path() -> str | None:
    """``ringleader list``: the command running now, for a ``--help`` hint."""
    try:
        from typer._click import get_current_context  # Typer >= 0.29 vendors click
    except ImportError:  # pragma: no cover - older Typer
        from click import get_current_context
    ctx = get_current_context(silent=True)
    return ctx.command_path if ctx is not None else None


BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a filter cut off by `head`


def fail(message: str, exit_code: int, fix: str | None = None) -> typer.Exit:
    """Print ``error: message`` (and ``  fix: ...``) on stderr; the Exit to raise."""
    err_console.print(
        f"[red]error:[/red] {escape(message)}", markup=True, highlight=False, soft_wrap=True
    )
    if fix:
        err_console.print(f"  fix: {fix}", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(exit_code)


def reports_errors(fn: F) -> F:
    """Errors become one clear line on stderr (two with the fix) and their exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RingleaderError as exc:
            raise fail(str(exc), exc.exit_code, fix_for(exc)) from None
        except KeyboardInterrupt:
            raise fail("interrupted", INTERRUPTED) from None
        except BrokenPipeError:
            # The reader went away (``ringleader logs X | head``): as any Unix filter,
            # stop quietly; stdout is pointed at /dev/null so its final flush cannot fail.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(BROKEN_PIPE) from None
        except (typer.Exit, typer.Abort, typer.exceptions.TyperException):
            raise  # Typer's own: an exit code, or a usage error it prints itself
        except Exception as exc:
            if os.environ.get(DEBUG_VAR):
                raise
            raise fail(
                f"unexpected {type(exc).__name__}: {exc}",
                1,
                f"this is a bug in ringleader; run again with {DEBUG_VAR}=1 for the traceback "
                "to report",
            ) from None

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


def usage_error(exc: Exception, command_path: str) -> typer.Exit:
    """What click finds wrong in a command line (an unknown option, a missing argument,
    a value of the wrong form), as one line and the fix; the Exit to raise (2).

    ``command_path`` (``ringleader logs``) is the command the line was for, when
    the exception does not say it.  Why not click's own form: it is a box of
    usage text, and ``reports_errors``' form is what every other error has.
    """
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else command_path
    message, hint = _usage_message(exc)
    see = f"see `{path} --help`"
    if message.startswith("no such command"):
        see = f"`{path} --help` lists the commands"
    if hint and "(see --help)" in hint:
        fix = hint.replace("(see --help)", f"(see `{path} --help`)")
    else:
        fix = f"{hint} {see}" if hint else see
    return fail(message, getattr(exc, "exit_code", 2), _sentence(fix))


def _usage_message(exc: Exception) -> tuple[str, str]:
    """(the error, a hint it carries: "did you mean ...?") of a click exception."""
    kind = type(exc).__name__
    if kind == "NoSuchOption":
        option = exc.option_name  # type: ignore[attr-defined]
        hint = str(getattr(exc, "message", "")).removeprefix(f"No such option: {option}")
        hint = hint.lstrip(". ").strip()
        close = list(getattr(exc, "possibilities", None) or ())  # the closest first
        close = likely_options(option, _long_options(getattr(exc, "ctx", None)), close)
        if close and not hint:
            hint = f"did you mean {close[0]}?"
        return f"no such option: {option}", hint
    kinds = {cls.__name__ for cls in type(exc).__mro__}
    if "BadParameter" in kinds and "MissingParameter" not in kinds:
        where = _param_hint(exc)
        problem = _value_problem(exc) or str(getattr(exc, "message", exc))
        return _sentence(f"{where}: {problem}" if where else f"invalid value: {problem}"), ""
    text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    extra = re.fullmatch(r"Got unexpected extra argument\(s\) \((.*)\)", text, re.DOTALL)
    if extra:
        text = f"unexpected extra argument{'s' if ' ' in extra[1] else ''}: {extra[1]}"
    text = re.sub(r"'(-[\w-]+|[A-Z][A-Z0-9_]*)'", r"\1", text)  # --tail, NAME: no quotes
    error, _, close = _sentence(text).partition(". Did you mean ")
    return error, f"did you mean {close}" if close else ""


def likely_options(typed: str, options: Iterable[str], close: Sequence[str]) -> list[str]:
    """The options to suggest for an unknown ``typed``, the likeliest first.

    First the real options that ``typed`` begins (``--al`` is ``--all-projects``
    cut short, whatever difflib thinks closer by its letters: ``--help``), when
    there are at most three; then ``close``, the options spelled most like it
    (difflib's, as click and ``submit_argv`` find them: ``--nprocs`` -> ``--nproc``).
    """
    starting = {o for o in options if typed.startswith("--") and o.startswith(typed)}
    first = [o for o in close if o in starting] + sorted(starting - set(close))
    return list(dict.fromkeys([*first, *close] if len(starting) <= 3 else close))


def _long_options(ctx: Any) -> list[str]:
    """The ``--long`` options of the command a click context is for (``--help`` too)."""
    if ctx is None:
        return []
    names = [*ctx.command.get_help_option_names(ctx)]
    for param in ctx.command.get_params(ctx):
        if param.param_type_name == "option":
            names += [*param.opts, *param.secondary_opts]
    return [name for name in names if name.startswith("--")]


def _sentence(text: str) -> str:
    """One line, starting in lower case (unless with a name: ``NAME``), no final dot."""
    text = " ".join(text.split()).rstrip(".")
    if text[:1].isupper() and text[1:2].islower():
        text = text[:1].lower() + text[1:]
    return text


def _param_hint(exc: Exception) -> str | None:
    """The flag or argument an error is about, as typed: ``-t/--tail``, ``NAME``."""
    hint = getattr(exc, "param_hint", None)
    if hint is not None:
        return hint if isinstance(hint, str) else "/".join(hint)
    param = getattr(exc, "param", None)
    if param is None:
        return None
    if param.param_type_name == "option":
        return "/".join([*param.opts, *param.secondary_opts])
    return param.metavar or param.name.upper()


# pydantic's error types (Typer checks values with it) -> what to say of the value
_VALUE_PROBLEMS = {
    "int_parsing": "is not a whole number",
    "int_from_float": "is not a whole number",
    "float_parsing": "is not a number",
    "bool_parsing": "is not true or false",
}


def _value_problem(exc: Exception) -> str | None:
    """A value Typer refused, in words (``'abc' is not a whole number``), not pydantic's."""
    cause = exc.__cause__
    errors = getattr(cause, "errors", None)
    if not callable(errors):
        return None
    found = errors()
    if not found:
        return None
    first = found[0]
    value = first.get("input")
    shown = repr(value) if isinstance(value, str) else str(value)
    said = _VALUE_PROBLEMS.get(first.get("type", ""))
    if said:
        return f"{shown} {said}"
    text = str(first.get("msg", "")).removeprefix("Value error, ")
    if text.startswith("Input should be "):  # a bound: the number as typed
        return f"{value} should be {text.removeprefix('Input should be ')}"
    return text or None

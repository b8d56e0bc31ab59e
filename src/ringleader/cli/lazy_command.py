"""One command of ``ringleader``, known by name and help line, loaded when it runs.

Why apart from ``cli/main.py``: main holds the table of commands and the group
that dispatches them; this module holds how one entry of that table becomes the
real (click) command, and the help tidying every loaded command gets, so that
each command's ``--help`` reads as a usage line whichever module defines it.
Nothing here imports Typer until a command is loaded: ``ringleader launch``
imports this module and must stay light (``tests/launch/test_light.py``).
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Typer's click (vendored since Typer 0.29; plain click before)
    from typer._click import Command

_PYTHON_TYPE = re.compile(r"<(str|int|float|bool|(list|tuple|dict)\[.*\])>")


@dataclass(frozen=True)
class LazyCommand:
    """A command known by name and help line; its module is imported to run it.

    ``target`` is ``"module:attribute"``: a command function, or (``group``)
    a ``typer.Typer`` or a function returning one.
    """

    target: str
    summary: str  # the line ``ringleader --help`` shows
    group: bool = False
    help: str | None = None  # the command's own help, when not its docstring's
    context_settings: dict[str, Any] = field(default_factory=dict)

    def load(self, name: str) -> Command:
        """The real (click) command, built as ``app.command``/``app.add_typer`` would."""
        import typer

        module, _, attribute = self.target.partition(":")
        obj = getattr(importlib.import_module(module), attribute)
        holder = typer.Typer(add_completion=False)
        holder.callback()(_no_options)  # a callback makes ``holder`` a group, even of one
        if self.group:
            holder.add_typer(obj if isinstance(obj, typer.Typer) else obj(), name=name)
        else:
            settings = dict(self.context_settings) or None
            cls = getattr(obj, "command_class", None)  # e.g. submit's SubmitCommand
            holder.command(name, help=self.help, context_settings=settings, cls=cls)(obj)
        command = typer.main.get_group(holder).commands[name]
        _tidy_help(command)
        return command


def _tidy_help(command: Any) -> None:
    """Help that reads as a usage line: no ``<bool>`` after an on/off flag (``--help``
    included), ``<str>`` rather than ``<list[str]>`` for a repeatable option, and an
    argument named in capitals (``NAME``, in help and errors) without a Python type
    beside it (its help says what it is; choices and paths still show).  A required
    argument shows in the usage line as ``NAME``, as other tools show it, not as
    Typer's ``{NAME}``, which reads as "one of these choices".

    A command that declares its own metavar keeps it.  Typer's display helpers
    are internal, hence the ``getattr``: another Typer shows its own help.
    """
    from typer.core import TyperArgument, TyperGroup, TyperOption

    for param in command.params:
        if isinstance(param, TyperOption) and param.metavar is None and param.is_flag:
            param.metavar = ""
            continue
        display = getattr(param, "display_type", None)
        shown = display(None) if callable(display) else ""
        if isinstance(param, TyperArgument):
            if param.metavar is None:
                param.metavar = param.name.upper()
            param.get_usage_pieces = functools.partial(_usage_pieces, param.get_usage_pieces)
            if isinstance(shown, str) and _PYTHON_TYPE.fullmatch(shown):
                param.display_type_rich = lambda ctx: None
            continue
        if not (isinstance(shown, str) and shown.startswith("<list[") and shown.endswith("]>")):
            continue
        if param.metavar is None:
            param.metavar = f"<{shown[6:-2]}>"
    get_help_option = command.get_help_option
    command.get_help_option = lambda ctx: quiet_help_option(get_help_option(ctx))
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            _tidy_help(sub)


def _usage_pieces(usage_pieces: Any, ctx: Any) -> list[str]:
    """An argument's words in the usage line, a required one bare: ``NAME``, not
    ``{NAME}``; and one ``...`` after a metavar that says it already (``HOST...``)."""
    pieces = [re.sub(r"^\{(.*)\}(\.\.\.)?$", r"\1\2", p) for p in usage_pieces(ctx)]
    return [re.sub(r"(\.\.\.)+(\]?)$", r"...\2", piece) for piece in pieces]


def quiet_help_option(help_option: Any) -> Any:
    """``--help`` without ``<bool>`` (every loaded command's, and the root group's)."""
    if help_option is not None and help_option.metavar is None:
        help_option.metavar = ""
    return help_option


def _no_options() -> None:
    """The callback of the group that builds one loaded command."""

"""Where a submit command's own options end and the workload's command begins.

Run:ai's CLI (cobra) and ours must agree on one reading of a line such as

    submit-dist pytorch x --workers 1 python train.py -g 2
    submit-mpi dist-int --processes=2 -g 1 -i IMAGE --command="sh" --args="-c" \
        --args="sleep infinity" --interactive

Click alone reads options anywhere on the line and, told to let unknown ones
through, makes them part of the command.  ``SubmitCommand`` reads the line
first (``split_argv``) and hands click only what is ours.

Rules (what docs/control-plane.md's submit table says):
- ``--`` ends our options; everything after it is the workload's command;
- without ``--``, the first word that is neither an option, an option's value
  nor NAME starts the command, and everything from it on belongs to the
  command (``python train.py -g 2`` asks for no GPU);
- an option we do not have, before the command, is an error naming it (exit 2),
  never part of the command;
- ``--command`` and ``--name-prefix`` take a value when one follows
  (``--command=sh``, ``--command sh``: Run:ai's older form) and are bare flags
  otherwise (``--command -- CMD``: Run:ai's current form; ``NAME --name-prefix``:
  NAME is the prefix);
- a command whose first word is blank is an error (exit 2): it is what a shell
  makes of a pasted line ending in a backslash *and a space* (seed 001 prints
  one), a ``' '`` word, with the next line run as a command of its own.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperOption

try:  # Typer >= 0.29 vendors click
    from typer._click.exceptions import BadOptionUsage, NoSuchOption, UsageError
except ImportError:  # pragma: no cover - older Typer uses click itself
    from click.exceptions import (  # type: ignore[no-redef]
        BadOptionUsage,
        NoSuchOption,
        UsageError,
    )

ARGV_KEY = "ringleader.submit_argv"  # where ``ctx.meta`` keeps the ``SubmitArgv``
OPTIONAL_VALUE = ("--command", "--name-prefix")  # a value if one follows, else a flag


@dataclass
class SubmitArgv:
    """A submit command line, split: ``options`` for click, the rest for the workload."""

    options: list[str] = field(default_factory=list)  # our options, their values, NAME
    command: list[str] = field(default_factory=list)  # after ``--`` or from the first extra word
    bare: set[str] = field(default_factory=set)  # OPTIONAL_VALUE parameters given as flags
    typed: dict[str, str] = field(default_factory=dict)  # parameter name -> the flag as typed


def split_argv(params: Sequence[Any], args: Sequence[str]) -> SubmitArgv:
    """Split ``args`` (what follows the command's name) by the rules above.

    ``params`` are the command's click parameters (``--help`` included).
    Raises click's ``NoSuchOption`` for an unknown option, ``BadOptionUsage``
    for an option missing its value and ``UsageError`` for a blank command, all exit 2.
    """
    by_flag: dict[str, Any] = {}
    for param in params:
        if isinstance(param, TyperOption):
            for flag in (*param.opts, *param.secondary_opts):
                by_flag[flag] = param
    positionals = sum(1 for p in params if isinstance(p, TyperArgument))
    out = SubmitArgv()
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            out.command = list(args[i + 1 :])
            break
        if not token.startswith("-") or token == "-":
            if positionals:
                out.options.append(token)
                positionals -= 1
                i += 1
                continue
            out.command = list(args[i:])
            break
        flag, attached = _flag_of(token)
        param = by_flag.get(flag)
        if param is None:
            raise _no_such_option(flag, by_flag)
        out.typed[param.name] = flag
        following = args[i + 1] if i + 1 < len(args) else None
        if flag in OPTIONAL_VALUE and attached is None:
            if following is None or following.startswith("-"):
                out.bare.add(param.name)
                i += 1
                continue
            attached = following
            i += 1
        elif attached is None and not param.is_flag:
            if following is None:
                raise BadOptionUsage(flag, f"Option '{flag}' requires a value.")
            attached = following
            i += 1
        if param.name == "name_prefix":
            positionals = 0  # a prefix names the workload: the next word starts the command
        out.options += [flag] if attached is None else [flag, attached]
        i += 1
    if out.command and not out.command[0].strip():
        raise UsageError(
            f"the workload's command starts with a blank word ({out.command[0]!r}): a line "
            "ending in a backslash and a space ends there, and the next line runs as a "
            "command of its own. Remove the space after the backslash."
        )
    return out


def _flag_of(token: str) -> tuple[str, str | None]:
    """``--gpu=1`` -> (``--gpu``, ``1``); ``-g1`` -> (``-g``, ``1``); ``-g`` -> (``-g``, None)."""
    if token.startswith("--"):
        flag, sep, value = token.partition("=")
        return flag, value if sep else None
    return token[:2], token[2:] or None


def _no_such_option(flag: str, by_flag: dict[str, Any]) -> NoSuchOption:
    from ringleader.cli.common import likely_options

    flags = [f for f in by_flag if f.startswith("--")]
    close = likely_options(flag, flags, difflib.get_close_matches(flag, flags, n=3))[:3]
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    return NoSuchOption(
        flag,
        message=(
            f"No such option: {flag}.{hint} Options of the workload's command go after "
            "`--` (see --help)."
        ),
    )


class SubmitCommand(TyperCommand):
    """A Typer command that splits its line with ``split_argv`` before click parses it.

    The command's function reads the split from ``ctx.meta[ARGV_KEY]``.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            split = split_argv(self.get_params(ctx), args)
        except UsageError as exc:
            exc.ctx = ctx  # so the error shows this command's usage line
            raise
        ctx.meta[ARGV_KEY] = split
        return super().parse_args(ctx, split.options)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [*super().collect_usage_pieces(ctx), "[-- COMMAND [ARGS]...]"]

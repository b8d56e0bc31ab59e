"""The CLI explains itself: help on every flag, an example per command, ``--version``.

One walk over every command of the real CLI (``cli/main.py``'s ``COMMANDS``,
groups recursively), so no command or flag added later goes without help:
each parameter has help text, each option a metavar (not ``<int>``), each
command and group an example that parses, and ``--help`` reads at 80 columns.
Plus a few commands driven as a user runs them (``ringleader ... --help``).
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from typer.core import TyperArgument, TyperGroup
from typer.testing import CliRunner

from ringleader import __version__
from ringleader.cli.main import COMMANDS, typer_app
from tests.cli.conftest import run_cli

SUBMITS = ("submit-mpi", "submit-dist pytorch", "submit-dist mpi", "distributed submit")
PYTHON_TYPE = re.compile(r"<(str|int|float|bool|list\[[^>]*\]|dict\[[^>]*\]|tuple\[[^>]*\])>")


def _ringleader(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={**os.environ, "TERM": "dumb"}, columns=80, timeout=60)


def _walk(command: Any, path: str) -> Iterator[tuple[str, Any]]:
    yield path, command
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            yield from _walk(sub, f"{path} {name}")


# (path, click command) of every command and group, loaded as the CLI loads them.
ALL = [pair for name, entry in COMMANDS.items() for pair in _walk(entry.load(name), name)]
PATHS = [path for path, _ in ALL]


def _examples(help_text: str, path: str) -> list[str]:
    """The ``ringleader PATH ...`` lines of a help text, with their continuation lines
    (an example too long for one line goes on with a line starting with ``-``)."""
    found: list[str] = []
    continuing = False
    for line in help_text.splitlines():
        text = line.strip().removeprefix("Example:").removeprefix("Examples:").strip()
        if text.startswith(f"ringleader {path} ") or text == f"ringleader {path}":
            found.append(text)
            continuing = True
        elif continuing and text.startswith("-"):
            found[-1] += " " + text
        else:
            continuing = False
    return found


def test_version() -> None:
    flag = _ringleader("--version")
    assert flag.returncode == 0 and flag.stdout.strip() == f"ringleader {__version__}"
    assert _ringleader("version").stdout.strip() == __version__


def test_the_walk_sees_every_command() -> None:
    assert {"launch", "logs", "distributed exec", "submit-dist pytorch", "nodes add"} <= set(PATHS)
    assert {"environment create", "compute list", "top node", "config project"} <= set(PATHS)


@pytest.mark.parametrize(("path", "command"), ALL, ids=PATHS)
def test_every_parameter_has_help_and_a_metavar(path: str, command: Any) -> None:
    assert "Example" in (command.help or ""), f"{path}: no example in its help"
    if isinstance(command, TyperGroup):
        return
    for param in command.params:
        assert (param.help or "").strip(), f"{path}: {param.opts} has no help"
        if not isinstance(param, TyperArgument) and not param.is_flag:
            assert param.metavar, f"{path}: {param.opts} would show its Python type"


@pytest.mark.parametrize(("path", "command"), ALL, ids=PATHS)
def test_every_example_parses(path: str, command: Any) -> None:
    """Each ``ringleader PATH ...`` example of a command's help names flags that exist,
    with values of the right form (click reads it; nothing runs)."""
    if isinstance(command, TyperGroup):
        return
    examples = _examples(command.help or "", path)
    assert examples, f"{path}: no `ringleader {path} ...` example"
    for example in examples:
        words = shlex.split(example.split(" | ")[0], comments=True)
        command.make_context(path, words[1 + len(path.split()) :])  # raises on a bad flag


@pytest.mark.parametrize(("path", "command"), [("", None), *ALL], ids=["ringleader", *PATHS])
def test_help_reads_at_80_columns_whole_without_python_types(
    path: str, command: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No line over 80 columns, no text cut short (``…``), no ``<int>``, and nothing
    that rich would take for markup and drop (a ``[...]`` of the help text)."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "dumb")
    shown = CliRunner().invoke(typer_app(), [*path.split(), "--help"], prog_name="ringleader")
    assert shown.exit_code == 0, shown.output
    assert not PYTHON_TYPE.findall(shown.output), f"{path}:\n{shown.output}"
    wide = [line for line in shown.output.splitlines() if len(line) > 80]
    assert not wide and "…" not in shown.output, f"{path}:\n{shown.output}"
    assert "Example" in shown.output or path == ""
    flat = re.sub(r"[\s│]", "", shown.output)
    helps = [command.help or ""] + [p.help or "" for p in command.params] if command else []
    for text in helps:
        for segment in re.findall(r"\[[^\]]*\]", text.replace("\\[", "[")):
            assert re.sub(r"\s", "", segment) in flat, f"{path}: {segment} is not shown"


@pytest.mark.parametrize("command", [*SUBMITS, "launch", "logs", "distributed exec", "server"])
def test_help_as_a_user_reads_it(command: str) -> None:
    shown = _ringleader(*command.split(), "--help")
    assert shown.returncode == 0, shown.stderr
    assert not PYTHON_TYPE.findall(shown.stdout), shown.stdout
    assert "Example" in shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80


def test_launch_help_is_typers_from_the_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    """``launch`` goes past Typer for its common forms (``launch/command.py``); its
    ``--help`` is Typer's, the same bytes from the entry point as from the app."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "dumb")
    direct = CliRunner().invoke(typer_app(), ["launch", "--help"], prog_name="ringleader")
    assert _ringleader("launch", "--help").stdout == direct.output


@pytest.mark.parametrize("command", SUBMITS)
def test_submit_help_lists_runai_flags_with_their_meaning(command: str) -> None:
    shown = _ringleader(*command.split(), "--help").stdout
    flags = ["--command", "--args", "-e", "--working-dir", "--interactive", "-i", "--priority"]
    flags += ["--backoff-limit", "--name-prefix", "--node-pools", "-p"]
    if command != "distributed submit":  # v2 asks for compute with the API's names
        flags += ["-g", "--gpu-memory", "--cpu", "--memory", "--preemptible"]
    else:
        flags += ["--gpu-portion-request", "--cpu-memory-request", "--preemptibility"]
    for flag in flags:
        assert f" {flag} " in shown, f"{command}: {flag} missing\n{shown}"
    assert "[-- COMMAND [ARGS]...]" in shown


# A line of help that is an example: ``ringleader ...``, or a shell line that runs it
# (``sudo ringleader ...``, ``echo x | ringleader ...``), after a label (``Example:``).
_LABEL = re.compile(r"^(?:[A-Z][A-Za-z ]*:\s+)?")
_EXAMPLE = re.compile(r"^(?:ringleader |(?:sudo|salloc|srun|echo|curl|[A-Z_]+=)\S*\s.*ringleader)")


def _example_lines(help_text: str) -> list[str]:
    lines = [_LABEL.sub("", line.strip(), count=1) for line in help_text.splitlines()]
    return [line for line in lines if _EXAMPLE.match(line)]


def _rendered_help(path: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "dumb")
    shown = CliRunner().invoke(typer_app(), [*path.split(), "--help"], prog_name="ringleader")
    assert shown.exit_code == 0, shown.output
    return shown.output


def test_the_example_finder_sees_examples() -> None:
    text = "Examples:\n  ringleader a -n 2\n  sudo ringleader b\nExample: ringleader c\nsee x"
    text += "\n  echo 'x' | ringleader d\nIn a script: curl $(ringleader token) http://h/\n"
    assert _example_lines(text) == [
        "ringleader a -n 2",
        "sudo ringleader b",
        "ringleader c",
        "echo 'x' | ringleader d",
        "curl $(ringleader token) http://h/",
    ]


@pytest.mark.parametrize(("path", "command"), [("", None), *ALL], ids=["ringleader", *PATHS])
def test_help_at_80_columns_can_be_copied(
    path: str, command: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a user copies from ``--help`` at 80 columns works when pasted: each example
    (comment included) on one line of its own, never wrapped and never continued on
    the next line; each value hint (``user|account:NAME|server``) whole; a usage line
    that names an argument as ``NAME``, not ``{NAME}`` (which reads as a choice), and
    ``HOST...``, not ``HOST......``; and one-line summaries, so that a command list
    shows no line broken mid-sentence."""
    shown = _rendered_help(path, monkeypatch)
    lines = shown.splitlines()
    start = next(i for i, line in enumerate(lines) if "usage:" in line.lower())
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    usage = lines[start:end]
    assert usage and not any("{" in line or "...." in line for line in usage), f"{path}:\n{shown}"
    if command is None:
        summaries = {name: entry.summary for name, entry in COMMANDS.items()}
    else:
        help_text = command.help or ""
        for example in _example_lines(help_text):
            assert any(example in line for line in lines), f"{path}: {example!r} wraps\n{shown}"
        source = [line.strip() for line in help_text.splitlines()]
        for before, after in itertools.pairwise(source):
            if _EXAMPLE.match(_LABEL.sub("", before, count=1)):
                assert not before.endswith("\\") and not after.startswith("-"), (
                    f"{path}: an example goes on over two lines: {before!r} {after!r}"
                )
        for param in getattr(command, "params", []):
            if param.metavar and " " not in param.metavar:
                hint = param.metavar
                assert any(hint in line for line in lines), f"{path}: {hint} wraps\n{shown}"
        subs = getattr(command, "commands", {})
        summaries = {name: (sub.help or "").strip().split("\n\n")[0] for name, sub in subs.items()}
    broken = {name: text for name, text in summaries.items() if "\n" in text}
    assert not broken, f"{path}: summaries with a line break: {broken}"

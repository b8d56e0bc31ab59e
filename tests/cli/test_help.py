"""The CLI explains itself: help on every flag, an example per command, ``--version``.

Driven as a user runs it (``ringleader ... --help`` at 80 columns), plus a walk
over the commands' definitions so no flag added later goes without help.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from typer.core import TyperArgument, TyperGroup

from ringleader import __version__
from ringleader.cli.main import COMMANDS

# The commands this check covers: the submit verbs and these command groups.
COVERED = (
    "login", "whoami", "token", "version", "submit-mpi", "submit-dist", "distributed submit",
    "project", "config", "nodes", "top", "user", "access-key",
)  # fmt: skip
SUBMITS = ("submit-mpi", "submit-dist pytorch", "submit-dist mpi", "distributed submit")


def _ringleader(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    return subprocess.run(
        [sys.executable, "-m", "ringleader", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def _commands() -> Iterator[tuple[str, Any]]:
    """(path, click command) of every covered command and group, loaded as the CLI does."""

    def walk(command: Any, path: str) -> Iterator[tuple[str, Any]]:
        yield path, command
        if isinstance(command, TyperGroup):
            for name, sub in command.commands.items():
                yield from walk(sub, f"{path} {name}")

    for name, entry in COMMANDS.items():
        for path, command in walk(entry.load(name), name):
            if any(path == c or path.startswith(f"{c} ") for c in COVERED) or (
                path == "distributed"
            ):
                yield path, command


def test_version() -> None:
    flag = _ringleader("--version")
    assert flag.returncode == 0 and flag.stdout.strip() == f"ringleader {__version__}"
    assert _ringleader("version").stdout.strip() == __version__


def test_every_covered_command_has_an_example_and_every_flag_help() -> None:
    seen = set()
    for path, command in _commands():
        seen.add(path)
        assert "Example" in (command.help or ""), f"{path}: no example in its help"
        if isinstance(command, TyperGroup):
            continue
        for param in command.params:
            assert param.help, f"{path}: {param.opts} has no help"
            if not isinstance(param, TyperArgument) and not param.is_flag:
                assert param.metavar, f"{path}: {param.opts} shows its Python type"
    assert {"submit-dist pytorch", "distributed submit", "user assign", "nodes add"} <= seen


@pytest.mark.parametrize("command", [*SUBMITS, "project create", "user update", "nodes remove"])
def test_help_reads_at_80_columns(command: str) -> None:
    shown = _ringleader(*command.split(), "--help")
    assert shown.returncode == 0, shown.stderr
    for python_type in ("<list[", "<bool>", "<float>", "<int>"):
        assert python_type not in shown.stdout, shown.stdout
    assert "Example" in shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80


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

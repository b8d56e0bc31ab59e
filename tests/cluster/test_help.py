"""The cluster commands explain themselves: every argument and flag has help text,
every command shows examples, and each example parses (its flags exist)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
from typer.core import TyperArgument

from ringleader.cli.main import COMMANDS

CLUSTER_COMMANDS = ("ssh-setup", "hostfile", "doctor", "sync", "install")


def examples(help_text: str, name: str) -> list[str]:
    return [
        line.strip()
        for line in help_text.splitlines()
        if line.strip().startswith(f"ringleader {name} ")
    ]


@pytest.mark.parametrize("name", CLUSTER_COMMANDS)
def test_every_parameter_has_help_and_every_example_parses(name: str) -> None:
    command = COMMANDS[name].load(name)
    undocumented = [p.name for p in command.params if not (getattr(p, "help", "") or "").strip()]
    assert undocumented == [], f"{name}: no help for {undocumented}"
    untyped = [
        p.name
        for p in command.params
        if not isinstance(p, TyperArgument) and not p.is_flag and not p.metavar
    ]
    assert untyped == [], f"{name}: {untyped} would show a Python type, not a metavar"
    shown = examples(command.help or "", name)
    assert shown, f"{name} shows no example"
    for example in shown:
        argv = shlex.split(example.split(" | ")[0])[2:]  # without `ringleader NAME`
        command.make_context(name, argv)  # raises on an unknown flag or a bad value


@pytest.mark.parametrize("name", CLUSTER_COMMANDS)
def test_help_reads_at_80_columns(name: str) -> None:
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "ringleader", name, "--help"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 80
    assert "Examples" in done.stdout and f"ringleader {name} " in done.stdout

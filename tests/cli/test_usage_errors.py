"""A usage error (unknown option, missing argument, a value of the wrong form) is one
line and what to do, exit code 2, for every command: as ``reports_errors`` says a
server's errors (``cli/common.py``), never click's boxed usage text.

Driven as a user types it; no server is needed (nothing gets that far), and the
home is an empty directory so that nothing could start one.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import home_env, run_cli


def _ringleader(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # RINGLEADER_URL: a command that got past parsing fails (7)
    env = home_env(home, TERM="dumb", RINGLEADER_URL="http://127.0.0.1:9")
    return run_cli(*args, env=env, columns=80, timeout=60)


# argv -> (the error line, what the fix line says, the --help it points to)
CASES = {
    "unknown option": (
        ["list", "--foo"],
        "error: no such option: --foo",
        "see `ringleader list --help`",
    ),
    "unknown option, with a close one": (
        ["list", "--all-project"],
        "error: no such option: --all-project",
        "did you mean --all-projects? see `ringleader list --help`",
    ),
    "unknown option, the start of one": (
        ["list", "--al"],
        "error: no such option: --al",
        "did you mean --all-projects? see `ringleader list --help`",
    ),
    "unknown option, the start of one, of a nested command": (
        ["distributed", "logs", "job", "--fol"],
        "error: no such option: --fol",
        "did you mean --follow? see `ringleader distributed logs --help`",
    ),
    "unknown option of launch, spelled like one": (
        ["launch", "--nprocs", "2", "--", "true"],
        "error: no such option: --nprocs",
        "did you mean --nproc? see `ringleader launch --help`",
    ),
    "unknown submit option, spelled like two": (
        ["submit-dist", "pytorch", "job", "--worker", "2", "--", "true"],
        "error: no such option: --worker",
        "did you mean --workers or --working-dir? Options of the workload's command go after"
        " `--` (see `ringleader submit-dist pytorch --help`)",
    ),
    "unknown submit option, the start of one": (
        ["submit-dist", "pytorch", "job", "--workers", "2", "--clean", "All", "--", "true"],
        "error: no such option: --clean",
        "did you mean --clean-pod-policy or --command? Options of the workload's command go after"
        " `--` (see `ringleader submit-dist pytorch --help`)",
    ),
    "unknown submit option": (
        ["submit-mpi", "job", "--processes", "2", "--gpus", "1", "--", "true"],
        "error: no such option: --gpus",
        "go after `--` (see `ringleader submit-mpi --help`)",
    ),
    "unknown option of a nested command": (
        ["distributed", "describe", "job", "--wide"],
        "error: no such option: --wide",
        "see `ringleader distributed describe --help`",
    ),
    "missing argument": (
        ["delete"],
        "error: missing argument NAME",
        "see `ringleader delete --help`",
    ),
    "missing argument of a group's command": (
        ["project", "create"],
        "error: missing argument NAME",
        "see `ringleader project create --help`",
    ),
    "missing command of exec": (
        ["exec", "job"],
        "error: missing argument COMMAND",
        "see `ringleader exec --help`",
    ),
    "not a number": (
        ["logs", "job", "--tail", "abc"],
        "error: -t/--tail: 'abc' is not a whole number",
        "see `ringleader logs --help`",
    ),
    "not a number, server": (
        ["server", "--port", "http"],
        "error: --port: 'http' is not a whole number",
        "see `ringleader server --help`",
    ),
    "out of range": (
        ["server", "--max-body-bytes", "5"],
        "error: --max-body-bytes: 5 should be greater than or equal to 1024",
        "see `ringleader server --help`",
    ),
    "not a choice": (
        ["list", "-o", "tsv"],
        "error: -o/--output: 'tsv' is not one of wide, json, yaml",
        "see `ringleader list --help`",
    ),
    "an option without its value": (
        ["distributed", "logs", "job", "--tail"],
        "error: option --tail requires an argument",
        "see `ringleader distributed logs --help`",
    ),
    "an extra argument": (
        ["delete", "a", "b"],
        "error: unexpected extra argument: b",
        "see `ringleader delete --help`",
    ),
    "no such command": (
        ["lst"],
        "error: no such command 'lst'",
        "did you mean 'list'? `ringleader --help` lists the commands",
    ),
    "no such command, letters swapped": (
        ["lsit"],
        "error: no such command 'lsit'",
        "did you mean 'list'? `ringleader --help` lists the commands",
    ),
    "unknown option of launch": (
        ["launch", "--foo", "-n", "1", "--", "true"],
        "error: no such option: --foo",
        "see `ringleader launch --help`",
    ),
    "unknown option of launch, before its command": (
        ["launch", "-n", "1", "--nprocs", "2", "python", "train.py"],
        "error: no such option: --nprocs",
        "see `ringleader launch --help`",
    ),
    "not a number, launch": (
        ["launch", "-n", "two", "--", "true"],
        "error: -n/--nproc/--np: 'two' is not a whole number",
        "see `ringleader launch --help`",
    ),
    "a bad value found by the command": (
        ["launch", "--ranks", "a", "--", "true"],
        "error: --ranks: expected rank numbers like 0,2; got 'a'",
        "see `ringleader launch --help`",
    ),
}


@pytest.mark.parametrize(("argv", "error", "fix"), CASES.values(), ids=CASES.keys())
def test_a_usage_error_is_one_line_and_the_fix(
    tmp_path: Path, argv: list[str], error: str, fix: str
) -> None:
    done = _ringleader(tmp_path, *argv)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and lines[0] == error, done.stderr
    assert lines[1].startswith("  fix: ") and lines[1].endswith(fix), done.stderr
    assert done.stdout == ""
    assert not (tmp_path / "server.json").exists()  # nothing started


def test_help_still_shows_for_a_group_without_its_command(tmp_path: Path) -> None:
    root = _ringleader(tmp_path)
    assert "Usage: ringleader" in root.stdout and root.stderr == ""
    group = _ringleader(tmp_path, "distributed")
    assert "Usage: ringleader distributed" in group.stdout and group.stderr == ""


def test_the_commands_own_errors_keep_their_form(tmp_path: Path) -> None:
    """Past parsing, a command's errors are ``reports_errors``' (here: no server)."""
    done = _ringleader(tmp_path, "list")
    assert done.returncode == 7 and done.stderr.startswith("error: cannot reach"), done.stderr


@pytest.mark.parametrize(
    ("typed", "close", "first"),
    [
        ("--al", ["--help"], ["--all-projects", "--help"]),  # the start of one option
        ("--all-project", ["--all-projects"], ["--all-projects"]),
        ("--nprocs", ["--nproc"], ["--nproc"]),  # no option starts so: spelling decides
        ("--wor", ["--workers", "--memory"], ["--workers", "--working-dir", "--memory"]),
        ("--", ["--help"], ["--help"]),  # the start of every option says nothing
        ("-a", [], []),
    ],
)
def test_an_option_cut_short_is_suggested_before_one_spelled_alike(
    typed: str, close: list[str], first: list[str]
) -> None:
    from ringleader.cli.common import likely_options

    options = ["--all-projects", "--help", "--nproc", "--workers", "--working-dir", "--memory"]
    assert likely_options(typed, options, close) == first

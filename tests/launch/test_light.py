"""``launch`` starts light: its path imports no pydantic, HTTP client, server or rich.

Asserts on module sets, never on durations.  Also: the quick reader of
launch's options agrees with the Typer command on every form it accepts,
and ``ringleader --help`` lists each command with its own help line.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ringleader.cli.main import COMMANDS
from ringleader.launch.command import OPTIONS, LaunchArgs, parse_quick

HEAVY = ("pydantic", "httpx", "fastapi", "sqlalchemy", "rich", "torch", "typer", "click")


def _imported(code: str) -> set[str]:
    """Top-level packages imported after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return {m.split(".")[0] for m in json.loads(proc.stdout.splitlines()[-1])}


@pytest.mark.parametrize(
    "code",
    [
        "import ringleader.launch.agent",
        "import ringleader.launch.mpi_rank",
        "import ringleader.launch.detached, ringleader.launch.mpi",
        "import ringleader.launch.frameworks as f; [x.load_supervisor() for x in f.all_frameworks()]",
        "import ringleader.cli.main, ringleader.launch.command",
    ],
)
def test_launch_path_imports_only_the_standard_library_and_the_launcher(code: str) -> None:
    heavy = _imported(code) & set(HEAVY)
    assert not heavy, f"{code!r} imports {sorted(heavy)}"


def test_a_whole_cli_launch_imports_nothing_heavy() -> None:
    code = (
        "import sys; from ringleader.cli.main import app\n"
        "try:\n    app(['launch', '-n', '2', '--', sys.executable, '-c', 'pass'])\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code"
    )
    heavy = _imported(code) & set(HEAVY)
    assert not heavy, sorted(heavy)
    # server modules stay out too
    proc = subprocess.run(
        [sys.executable, "-c", code + "\nprint([m for m in sys.modules if '.server' in m])"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stderr


def test_a_launch_in_no_image_leaves_out_the_image_and_training_modules() -> None:
    """A registry's client (urllib, http, email, ssl) is for ranks in an image, and
    runtime.metrics and runtime.modes for training code: none is on a plain launch's path."""
    code = (
        "import sys; from ringleader.cli.main import app\n"
        "try:\n    app(['launch', '-n', '2', '--', sys.executable, '-c', 'pass'])\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        "import json; print(json.dumps(sorted(sys.modules)))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    modules = set(json.loads(proc.stdout.splitlines()[-1]))
    unneeded = {"urllib.request", "http.client", "email", "ssl"}
    unneeded |= {"ringleader.runtime.metrics", "ringleader.runtime.modes"}
    assert not modules & unneeded, sorted(modules & unneeded)
    assert "ringleader.launch.registry_pull" not in modules


def test_the_plans_metrics_names_are_the_runtimes() -> None:
    from ringleader.launch import plan
    from ringleader.runtime import metrics

    assert (plan.METRICS_DIR, plan.METRICS_FILE) == (metrics.METRICS_DIR, metrics.METRICS_FILE)


def _typer_reading(argv: list[str]) -> LaunchArgs:
    """What the Typer command reads from ``argv`` (parsing only, nothing runs)."""
    command = COMMANDS["launch"].load("launch")
    ctx = command.make_context("launch", list(argv))
    params = dict(ctx.params)
    params["env"] = list(params["env"] or [])
    return LaunchArgs(command=list(ctx.args), **params)


@pytest.mark.parametrize(
    "argv",
    [
        ["-n", "2", "--", "python", "-c", "pass"],
        ["--np=3", "--framework", "mpi", "--", "python", "x.py", "--lr", "1"],
        ["-H", "a:2,b:2", "--nproc-per-node", "2", "--max-restarts", "1", "--", "t"],
        ["--hostfile", "h.json", "--grace", "0.5", "--network-interface", "eth0", "--", "t"],
        ["--log-dir", "logs", "--ranks", "0,2", "--no-prefix", "--", "t", "--", "u"],
        ["-e", "A=1", "--env", "B=2", "--env=C=3", "--run-id", "rl-x", "--ssh-config", "c", "--"],
        ["--nproc", "2", "--hosts=h:1", "--", "python"],
        ["--slurm", "-N", "2", "--partition", "p", "--time=1:00:00", "--detach", "--", "x"],
        ["--slurm", "--sbatch-arg", "x", "--sbatch-arg=y", "--dry-run", "--", "x"],
    ],
)
def test_quick_reading_agrees_with_typer(argv: list[str]) -> None:
    assert parse_quick(argv) == _typer_reading(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["-n", "2", "python", "train.py"],  # no --: Typer's interspersed rules apply
        ["--help", "--", "x"],
        ["-n", "two", "--", "x"],
        ["-n", "-1", "--", "x"],
        ["--grace", "inf", "--", "x"],
        ["-n", "2", "-n", "3", "--", "x"],
        ["--ranks", "a", "--", "x"],
        ["--unknown", "--", "x"],
        ["-n"],
        ["-n", "--", "x"],
        ["--no-prefix=1", "--", "x"],
        ["-e=A=1", "--", "x"],  # Typer reads "=A=1": short options take no "="
    ],
)
def test_anything_unusual_goes_to_typer(argv: list[str]) -> None:
    assert parse_quick(argv) is None


def test_quick_options_are_the_typer_commands_options() -> None:
    command = COMMANDS["launch"].load("launch")
    typer_flags = {
        opt: param.name for param in command.params for opt in param.opts if opt != "--help"
    }
    assert typer_flags == {flag: name for flag, (name, _) in OPTIONS.items()}
    defaults = {p.name: p.default for p in command.params}
    for name, value in defaults.items():
        if name in LaunchArgs.__dataclass_fields__:
            field = LaunchArgs.__dataclass_fields__[name]
            mine = field.default_factory() if callable(field.default_factory) else field.default
            assert mine == (value if value is not None or name != "env" else []), name


def test_help_lines_are_the_commands_own() -> None:
    for name, entry in COMMANDS.items():
        command = entry.load(name)
        own = (command.help or "").split("\n\n")[0]
        assert entry.summary == own, name


def test_the_agent_starts_without_the_slow_standard_modules() -> None:
    """The agent is on every launch's path: argparse, dataclasses, pathlib stay out."""
    full = subprocess.run(
        [
            sys.executable,
            "-c",
            "import ringleader.launch.agent, json, sys; print(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    modules = set(json.loads(full.stdout.splitlines()[-1]))
    slow = modules & {"argparse", "dataclasses", "pathlib", "tempfile", "shutil", "inspect"}
    assert not slow, sorted(slow)
    assert "ringleader.runtime" not in modules


def test_the_agent_reads_its_arguments_and_refuses_others() -> None:
    from ringleader.launch.agent import CPU_AFFINITY, parse_args
    from ringleader.launch.protocol import HEARTBEAT_TIMEOUT_S
    from ringleader.runtime.env import CPU_AFFINITY as RUNTIME_CPU_AFFINITY

    assert CPU_AFFINITY == RUNTIME_CPU_AFFINITY
    assert parse_args(["--job-id", "rl-1"]) == ("rl-1", HEARTBEAT_TIMEOUT_S)
    assert parse_args(["--job-id=rl-2", "--heartbeat-timeout", "3"]) == ("rl-2", 3.0)
    for bad in ([], ["--job-id"], ["--jobid", "x"], ["--job-id", "x", "--heartbeat-timeout", "z"]):
        with pytest.raises(SystemExit, match=r"usage: python -m ringleader\.launch\.agent"):
            parse_args(bad)

"""``ringleader plan --script``: the model and its step time learnt from a real run.

Why through the CLI: what is tested is the whole path a user takes: the script runs
as one rank with launch's environment, the runtime's probe and metrics reach the
planner, the script is stopped (with everything it started) once enough steps are
seen, and a script that crashes or never uses the runtime is told apart, named.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from ringleader.examples import digits
from ringleader.launch.procs import pids_with_marker
from tests.cli.conftest import home_env

DIGITS = Path(digits.__file__)

# Reports forever (plan must stop it) and leaves a child behind in its group.
FOREVER = """\
import json, os, subprocess, sys, time
import torch
from ringleader import runtime

ctx = runtime.init()
model = runtime.prepare(torch.nn.Linear(3, 2))
names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
with open(sys.argv[1], "w") as file:
    json.dump({name: os.environ.get(name) for name in names} | {"argv": sys.argv[2:]}, file)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
step = 0
while True:
    runtime.report(step, samples=8)
    step += 1
    time.sleep(0.005)
"""


def plan(tmp_path: Path, *args: str, marker: str = "none") -> subprocess.CompletedProcess[str]:
    """``ringleader plan ARGS`` in ``tmp_path``; the script inherits ``PLAN_TEST=marker``."""
    return subprocess.run(
        [sys.executable, "-m", "ringleader", "plan", *args],
        env=home_env(tmp_path / "home", COLUMNS="80", RINGLEADER_URL="http://127.0.0.1:9",
                     PLAN_TEST=marker),
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def script(tmp_path: Path, text: str) -> str:
    path = tmp_path / "train.py"
    path.write_text(text)
    return str(path)


def test_the_digits_example_gives_its_real_parameter_count_and_a_step_time(
    tmp_path: Path,
) -> None:
    real = digits.build_model()
    marker = uuid.uuid4().hex
    done = plan(tmp_path, "--script", str(DIGITS), "--link", "1gbit", "--max-ranks", "4",
                "--steps", "5", "--json", "--", "--epochs", "50", marker=marker)  # fmt: skip
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["inputs"]["params"] == sum(p.numel() for p in real.parameters())
    assert body["inputs"]["dtype_bytes"] == 4
    assert body["inputs"]["compute_s"] > 0
    assert body["inputs"]["batch_size"] == digits.Config().batch_size  # report()'s samples
    assert body["source"]["compute"] == "measured running the script"
    assert body["source"]["measured_compute"]["steps"] == 5
    assert body["source"]["shapes"] == [list(p.shape) for p in real.parameters()]
    assert [p["ranks"] for p in body["predictions"]] == [1, 2, 3, 4]
    assert pids_with_marker(f"PLAN_TEST={marker}") == []  # 50 epochs: stopped, not ended


def test_the_script_runs_as_one_rank_and_is_stopped_with_its_children(tmp_path: Path) -> None:
    seen = tmp_path / "env.json"
    marker = uuid.uuid4().hex
    done = plan(tmp_path, "--script", script(tmp_path, FOREVER), "--link", "1gbit",
                "--json", "--", str(seen), "--its-own", "x", marker=marker)  # fmt: skip
    assert done.returncode == 0, done.stderr
    env = json.loads(seen.read_text())
    assert env["RANK"] == "0" and env["WORLD_SIZE"] == "1" and env["LOCAL_RANK"] == "0"
    assert env["LOCAL_WORLD_SIZE"] == "1" and env["MASTER_ADDR"] == "127.0.0.1"
    assert int(env["MASTER_PORT"]) > 0
    assert env["argv"] == ["--its-own", "x"]
    body = json.loads(done.stdout)
    assert body["inputs"]["params"] == 3 * 2 + 2
    assert body["inputs"]["batch_size"] == 8
    assert pids_with_marker(f"PLAN_TEST={marker}") == []


def test_a_module_runs_as_python_m_with_its_arguments(tmp_path: Path) -> None:
    (tmp_path / "mytrain").mkdir()
    (tmp_path / "mytrain" / "__init__.py").write_text("")
    (tmp_path / "mytrain" / "run.py").write_text(FOREVER)
    seen = tmp_path / "env.json"
    marker = uuid.uuid4().hex
    done = plan(tmp_path, "--module", "mytrain.run", "--link", "1gbit", "--json", "--",
                str(seen), "--its-own", "y", marker=marker)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(seen.read_text())["argv"] == ["--its-own", "y"]
    body = json.loads(done.stdout)
    assert body["inputs"]["params"] == 3 * 2 + 2
    assert body["source"]["compute"] == "measured running the script"
    assert pids_with_marker(f"PLAN_TEST={marker}") == []


def test_a_given_batch_size_wins_over_the_reported_samples(tmp_path: Path) -> None:
    done = plan(tmp_path, "--script", script(tmp_path, FOREVER), "--link", "1gbit",
                "--batch-size", "3", "--json", "--", str(tmp_path / "env.json"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["inputs"]["batch_size"] == 3


def test_a_crashing_script_shows_its_last_lines_and_fails(tmp_path: Path) -> None:
    crash = "import sys\nprint('loading', file=sys.stderr)\nraise SystemExit('boom: no data')\n"
    done = plan(tmp_path, "--script", script(tmp_path, crash), "--link", "1gbit")
    assert done.returncode == 1, done.stderr
    assert "exited with status 1" in done.stderr
    assert "loading" in done.stderr and "boom: no data" in done.stderr
    assert "ScriptFailed" not in done.stderr


def test_a_script_without_the_runtime_is_told_what_is_missing(tmp_path: Path) -> None:
    done = plan(tmp_path, "--script", script(tmp_path, "print('hi')\n"), "--link", "1gbit")
    assert done.returncode == 2, done.stderr
    assert "--script" in done.stderr and "runtime.prepare" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_script_that_never_reports_is_told_so(tmp_path: Path) -> None:
    quiet = ("import torch\nfrom ringleader import runtime\nruntime.init()\n"
             "runtime.prepare(torch.nn.Linear(2, 2))\n")  # fmt: skip
    done = plan(tmp_path, "--script", script(tmp_path, quiet), "--link", "1gbit")
    assert done.returncode == 2, done.stderr
    assert "runtime.report" in done.stderr and "0 step(s)" in done.stderr


def test_a_script_that_hangs_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    hang = "import time\ntime.sleep(600)\n"
    done = plan(tmp_path, "--script", script(tmp_path, hang), "--link", "1gbit",
                "--script-timeout", "1s", marker=marker)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "within 1s" in done.stderr and "runtime.prepare" in done.stderr
    assert pids_with_marker(f"PLAN_TEST={marker}") == []


def test_bad_flags_are_named_before_anything_runs(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    ok = script(tmp_path, FOREVER)
    cases = [
        (["--script", str(tmp_path / "missing.py"), "--link", "1gbit"], "--script"),
        (["--script", ok, "--model", "m:f", "--link", "1gbit"], "--script"),
        (["--params", "1M", "--step-time", "1s", "--link", "1gbit", "--", "x"], "--script"),
        (["--script", ok, "--link", "1gbit", "--script-timeout", "5"], "--script-timeout"),
        (["--script", ok, "--link", "fast", "--", str(tmp_path / "e.json")], "--link"),
        (["--script", ok, "--link", "1gbit", "--steps", "1"], "--steps"),
        (["--module", "no_such_module_here", "--link", "1gbit"], "--module"),
        (["--module", "json", "--script", ok, "--link", "1gbit"], "--script"),
        (["--module", "json", "--params", "1M", "--link", "1gbit"], "--module"),
    ]
    for args, flag in cases:
        done = plan(tmp_path, *args, marker=marker)
        assert done.returncode == 2, (args, done.stderr)
        assert flag in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "e.json").exists()  # the bad --link was found first
    assert pids_with_marker(f"PLAN_TEST={marker}") == []


def test_the_step_time_is_the_median_interval_per_step_less_the_wait(tmp_path: Path) -> None:
    from ringleader.planner.script import WARMUP, _learnt

    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps({"shapes": [[4, 3], [4]], "dtype": "torch.float32",
                                 "dtype_bytes": 4}))  # fmt: skip
    # Warm-up records (slow), then a report every 2 steps, 0.5 s apart: 0.25 s a step,
    # of which the runtime timed 0.05 s waiting for the all-reduce.
    warm = [{"step": i, "time": 100.0 + 10 * i} for i in range(WARMUP)]
    timed = [{"step": 10 + 2 * i, "time": 200.0 + 0.5 * i, "samples": 16, "comm": 0.05}
             for i in range(5)]  # fmt: skip
    learnt = _learnt("train.py", str(probe), warm + timed, steps=3, timeout_s=9)
    assert learnt.params == 16 and learnt.dtype_bytes == 4
    assert learnt.steps == 3  # steps + 1 records after the warm-up, the rest unused
    assert abs(learnt.step_s - 0.2) < 1e-9
    assert learnt.samples == 16

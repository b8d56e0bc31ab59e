"""The sbatch script is a pure function of its request: golden files, and refusals.

A golden file changes only on purpose: ``RINGLEADER_UPDATE_GOLDEN=1 pytest ...``
rewrites them; read the diff before committing it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ringleader.slurm.sbatch import (
    SbatchRequest,
    render_script,
    validate_extra_arg,
    validate_time,
)
from tests.helpers.golden import check_golden


def test_minimal_request() -> None:
    req = SbatchRequest(job_name="train", nodes=1, command=("python", "train.py"))
    check_golden("minimal.sbatch", render_script(req))


def test_every_field() -> None:
    req = SbatchRequest(
        job_name="my job #1",
        nodes=2,
        command=("python", "-c", "print('hi $HOME')", "a b"),
        ntasks_per_node=2,
        cpus_per_task=4,
        mem_per_node_mb=8000,
        gpus_per_node=1,
        partition="debug",
        time="1:00:00",
        account="ml",
        output="/shared/out dir/rl-%j.out",
        chdir="/shared/work",
        env={"WANDB_PROJECT": "x y", "A": "it's"},
        extra_args=("--exclusive", "--constraint=a100|h100", "--comment=two words"),
        setup_lines=("source /etc/profile.d/modules.sh",),
        requeue=True,
        signal="B:USR1@60",
    )
    check_golden("every_field.sbatch", render_script(req))


def test_the_script_is_valid_bash(tmp_path: Path) -> None:
    req = SbatchRequest(
        job_name="t", nodes=1, command=("echo", "it's $HOME", "; rm -rf /"), env={"K": "v'\""}
    )
    script = tmp_path / "job.sh"
    script.write_text(render_script(req))
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=True)
    assert out.stdout == "it's $HOME ; rm -rf /\n"


@pytest.mark.parametrize("text", ["5", "90", "10:30", "1:00:00", "100:00:00", "2-0", "2-12:30",
                                  "2-12:30:00", "infinite", "UNLIMITED"])  # fmt: skip
def test_time_forms_slurm_accepts(text: str) -> None:
    assert validate_time(text) == text


@pytest.mark.parametrize("text", ["", "abc", "1h", "1:60", "1:00:60", "2-24", "-1", "1::2",
                                  "2-1:2:3:4", "1:00:00 --wrap=x"])  # fmt: skip
def test_time_garbage_is_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--time: .*HH:MM:SS"):
        validate_time(text)


@pytest.mark.parametrize("text", ["--exclusive", "--constraint=a100", "--comment=a b"])
def test_extra_args_accepted(text: str) -> None:
    assert validate_extra_arg(text) == text


@pytest.mark.parametrize(
    "text",
    ["exclusive", "-p debug", "--", "--x\n#SBATCH --wrap=id", '--comment="q"', "--Bad=1",
     "--wrap=id", "--array=1-3", "--comment=" + "x" * 2000],
)  # fmt: skip
def test_malformed_extra_args_are_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--sbatch-arg: "):
        validate_extra_arg(text)


@pytest.mark.parametrize(
    ("change", "field"),
    [({"nodes": 0}, "nodes"), ({"ntasks_per_node": 0}, "ntasks_per_node"),
     ({"command": ()}, "command"), ({"job_name": "a\nb"}, "job_name"),
     ({"partition": 'x"y'}, "partition"), ({"time": "soon"}, "--time"),
     ({"env": {"BAD NAME": "1"}}, "env"), ({"signal": "USR1; id"}, "--signal")],
)  # fmt: skip
def test_unrenderable_requests_name_the_field(change: dict, field: str) -> None:
    base = {"job_name": "t", "nodes": 1, "command": ("true",)}
    with pytest.raises(ValueError, match=f"^{field}: "):
        render_script(SbatchRequest(**{**base, **change}))

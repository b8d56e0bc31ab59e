"""``ringleader launch --image IMAGE``: every rank in the image (real podman), the command
as typed (``python``/``sh`` are the image's), the gang's environment as for process
ranks, the working directory mounted, a failing rank's exit code as the launch's, and
no container left; bad input named by its flag before anything starts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.images import podman, python_image

__all__ = ["python_image"]  # the fixture, used by name
RL = [sys.executable, "-m", "ringleader", "launch"]


def _launch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RL, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip


def _left(run_id: str) -> str:
    listed = podman("ps", "-a", "--filter", f"label=ringleader.job={run_id}", "--format",
                    "{{.Names}}")  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.strip()


def test_ranks_run_in_the_image_with_the_gangs_environment(
    python_image: str, tmp_path: Path
) -> None:
    (tmp_path / "data.txt").write_text("from the host\n")
    script = ('echo "rank $RANK/$WORLD_SIZE master $MASTER_ADDR:$MASTER_PORT in '
              '$(. /etc/os-release; echo $ID) python $(python3 -c "import sys; '
              'print(sys.executable)") reads $(cat data.txt)"')  # fmt: skip
    done = _launch("-n", "2", "--run-id", "rl-img-env", "--image", python_image,
                   "--", "sh", "-c", script, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        line = (f"rank {rank}/2 master 127.0.0.1:", "in debian python /usr/bin/python3 "
                "reads from the host")  # fmt: skip
        assert any(line[0] in s and line[1] in s for s in done.stdout.splitlines()), done.stdout
    assert _left("rl-img-env") == ""


def test_a_failing_rank_in_the_image_fails_the_launch_with_its_code(
    python_image: str, tmp_path: Path
) -> None:
    done = _launch("-n", "2", "--run-id", "rl-img-fail", "--image", python_image, "--",
                   "python3", "-c", "import os, sys; sys.exit(3 if os.environ['RANK'] == '1' "
                   "else 0)", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert re.search(r"rank +: 1\n.*exit code : 3", done.stderr), done.stderr
    assert _left("rl-img-fail") == ""


def test_an_absent_image_with_policy_never_starts_no_rank(tmp_path: Path) -> None:
    done = _launch("-n", "1", "--image", "localhost/rl-not/here:1", "--image-pull-policy",
                   "Never", "--", "true", cwd=tmp_path)  # fmt: skip
    assert done.returncode != 0
    assert "image localhost/rl-not/here:1 is not on this host and its pull policy is Never" in (
        done.stderr
    ), done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--image", "a;b"], "--image: 'a;b' is not an image reference"),
        (["--image", "--privileged"], "--image"),
        (["--image", "x", "--image-pull-policy", "Sometimes"], "--image-pull-policy: 'Sometimes'"),
        (["--image-pull-policy", "Never"], "--image-pull-policy: needs --image IMAGE"),
        (["--image", "x", "--framework", "mpi"], "--framework: mpi ranks in an image"),
    ],
)
def test_bad_image_input_is_refused_naming_the_flag(
    args: list[str], said: str, tmp_path: Path
) -> None:
    done = _launch("-n", "1", *args, "--", "true", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr, done.stderr

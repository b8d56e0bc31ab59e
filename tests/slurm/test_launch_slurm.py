"""``ringleader launch --slurm`` against the real throw-away cluster: the script it
writes, a real training run followed to its end, failures, Ctrl-C, --detach and
--slurm-attach, a pending job's reason, and bad input refused before submission."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import job_pids, launch, start_launch, wait_for_ready, wait_until
from tests.fixtures.slurmcluster import SlurmCluster
from tests.helpers.golden import check_golden

DIGITS = ("python", "-m", "ringleader.examples.digits", "--epochs", "2")


def slurm_launch(
    cluster: SlurmCluster, cwd: Path, *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return launch(*args, cwd=cwd, env={"SLURM_CONF": str(cluster.conf)}, timeout=timeout)


def start_slurm_launch(cluster: SlurmCluster, cwd: Path, *args: str) -> subprocess.Popen[str]:
    return start_launch(*args, cwd=cwd, env=cluster.env)


def test_dry_run_prints_the_script_and_submits_nothing(tmp_path: Path) -> None:
    out = launch("--slurm", "-N", "2", "--nproc-per-node", "2", "--partition", "debug",
                 "--time", "1:00:00", "--gpus-per-node", "1", "--account", "ml",
                 "--sbatch-arg=--exclusive", "--max-restarts", "2", "-e", "SEED=1",
                 "--run-id", "rl-golden", "--dry-run", "--", "python", "train.py", "--lr", "0.1",
                 cwd=tmp_path, env={"SLURM_CONF": "/nonexistent"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = out.stdout.replace(str(tmp_path), "{CWD}").replace(sys.executable, "{PYTHON}")
    check_golden("launch_dry_run.sbatch", text)
    assert not list(tmp_path.iterdir())


def test_digits_through_launch_slurm(slurm: SlurmCluster, tmp_path: Path) -> None:
    out = slurm_launch(
        slurm, tmp_path, "--slurm", "-N", "2", "--nproc-per-node", "2", "--", *DIGITS
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[0/4 rl1] epoch 2/2: train loss" in out.stdout
    assert "[0/4 rl1] final test accuracy" in out.stdout
    # the job's own launch, merged in: one agent per node through srun
    assert "4 ranks on 2 host(s)" in out.stdout and "rl2: ranks 2-3" in out.stdout
    job_id = out.stderr.split("submitted Slurm job ")[1].split()[0]
    assert "is running on rl1, rl2" in out.stderr
    assert slurm.job_field(job_id, "JobState") == "COMPLETED"
    assert (tmp_path / f"ringleader-slurm-{job_id}.out").read_text() == out.stdout


def test_a_failing_rank_ends_the_job_with_its_code_and_traceback(
    slurm: SlurmCluster, tmp_path: Path, script
) -> None:
    path = script(
        "import os, sys, traceback\n"
        "if os.environ['RANK'] == '3':\n"
        "    try:\n        raise ValueError('boom on rank 3')\n"
        "    except ValueError:\n        traceback.print_exc(); sys.exit(3)\n"
        "import time; time.sleep(600)\n"
    )
    out = slurm_launch(slurm, tmp_path, "--slurm", "-N", "2", "--nproc-per-node", "2",
                       "--", "python", path)  # fmt: skip
    assert out.returncode == 3, out.stdout + out.stderr
    assert "[3/4 rl2] ValueError: boom on rank 3" in out.stdout
    assert "Traceback (most recent call last)" in out.stdout
    job_id = out.stderr.split("submitted Slurm job ")[1].split()[0]
    assert slurm.job_field(job_id, "ExitCode") == "3:0"


def test_ctrl_c_cancels_the_job_and_leaves_no_process(
    slurm: SlurmCluster, tmp_path: Path, script
) -> None:
    path = script("import time\nprint('ready', flush=True)\ntime.sleep(600)\n")
    proc = start_slurm_launch(slurm, tmp_path, "--slurm", "-N", "2", "--nproc-per-node", "2",
                              "--run-id", "rl-ctrlc", "--", "python", path)  # fmt: skip
    try:
        wait_for_ready(proc, 4)
        wait_until(lambda: job_pids("rl-ctrlc"), 30, "the ranks")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "cancelling Slurm job" in err and "cancelled" in err.splitlines()[-1]
    job_id = err.split("submitted Slurm job ")[1].split()[0]
    assert slurm.job_field(job_id, "JobState") == "CANCELLED"
    wait_until(lambda: not job_pids("rl-ctrlc"), 30, "every rank and agent gone")


def test_scancel_from_outside_ends_the_launch_with_a_clear_message(
    slurm: SlurmCluster, tmp_path: Path, script
) -> None:
    path = script("import time\nprint('ready', flush=True)\ntime.sleep(600)\n")
    proc = start_slurm_launch(slurm, tmp_path, "--slurm", "-N", "2", "--", "python", path)
    try:
        wait_for_ready(proc, 2)
        (job_id,) = slurm.jobs()
        slurm.run("scancel", job_id)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert err.splitlines()[-1] == (
        f"ringleader: Slurm job {job_id} was cancelled (scancel, or an administrator)"
    )


def test_detach_then_attach(slurm: SlurmCluster, tmp_path: Path, script) -> None:
    path = script("print('hello from the job', flush=True)\nraise SystemExit(4)\n")
    out = slurm_launch(slurm, tmp_path, "--slurm", "--detach", "--", "python", path)
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip()
    assert f"ringleader launch --slurm-attach {job_id}" in out.stderr
    assert f"scancel {job_id}" in out.stderr
    attached = slurm_launch(slurm, tmp_path, "--slurm-attach", job_id)
    assert attached.returncode == 4, attached.stderr
    assert "hello from the job" in attached.stdout


def test_a_pending_job_says_why_once(slurm: SlurmCluster, tmp_path: Path) -> None:
    holder = slurm.run("sbatch", "--parsable", "-N3", "--exclusive", "-o", "/dev/null",
                       "--wrap", "sleep 600").strip()  # fmt: skip
    wait_until(lambda: slurm.job_field(holder, "JobState") == "RUNNING", 60, "the holder runs")
    proc = start_slurm_launch(slurm, tmp_path, "--slurm", "--", "python", "-c", "print('ran')")
    try:
        line = wait_until(lambda: proc.stderr.readline(), 60, "a line")
        while "is pending" not in line:
            line = proc.stderr.readline()
            assert line, "the launch ended before saying why its job waits"
        assert "Resources: the nodes it asks for are busy" in line
        slurm.run("scancel", holder)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert re.search(r"^\[0/1 \S+\] ran$", out, re.M), out
    assert "is pending" not in err  # said once, before


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--slurm", "--partition", "nope"], "--partition: no partition 'nope'"),
        (["--slurm", "--time", "soon"], "--time: 'soon' is not a Slurm time limit"),
        (["--slurm", "-N", "0"], "-N/--nodes: must be at least 1"),
        (["--slurm", "--sbatch-arg", "exclusive"], "--sbatch-arg: 'exclusive' is not"),
        (["--slurm", "--sbatch-arg=--wrap=id"], "--sbatch-arg: --wrap is not allowed"),
        (["--slurm", "-H", "a:2"], "-H/--hosts: cannot be combined with --slurm"),
        (["--slurm", "-n", "4"], "-n/--nproc: with --slurm give -N"),
        (["--slurm", "--no-slurm"], "--no-slurm: cannot be combined with --slurm"),
        (["-N", "2"], "-N/--nodes: is a Slurm option: add --slurm"),
        (["--slurm", "--output", "/no/such/dir/x.out"], "--output: folder /no/such/dir"),
        (["--slurm", "--framework", "nope"], "--framework"),
    ],
)
def test_bad_input_is_refused_before_submission(
    slurm: SlurmCluster, tmp_path: Path, args: list[str], flag: str
) -> None:
    out = slurm_launch(slurm, tmp_path, *args, "--", "python", "-c", "pass")
    assert out.returncode == 2, out.stdout + out.stderr
    assert flag in out.stderr
    assert "Traceback" not in out.stderr
    assert slurm.jobs() == []
    assert not list(tmp_path.iterdir())


def test_attach_to_an_unknown_job_is_refused(slurm: SlurmCluster, tmp_path: Path) -> None:
    out = slurm_launch(slurm, tmp_path, "--slurm-attach", "999999")
    assert out.returncode == 2
    assert "--slurm-attach: Slurm knows no job 999999" in out.stderr
    out = slurm_launch(slurm, tmp_path, "--slurm-attach", "--user=x")
    assert out.returncode == 2 and "--slurm-attach" in out.stderr
    assert os.listdir(tmp_path) == []

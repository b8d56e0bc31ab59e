"""ringleader.slurm.commands against the real throw-away cluster: submit, follow a job's
record to its end, cancel (twice), partitions, host lists, and the errors users see."""

from __future__ import annotations

from pathlib import Path

import pytest

from ringleader.slurm import commands
from ringleader.slurm.commands import JobState, SlurmError
from ringleader.slurm.sbatch import SbatchRequest, render_script
from tests.conftest import wait_until
from tests.fixtures.slurmcluster import SlurmCluster


@pytest.fixture
def cluster(slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    return slurm


def script(tmp_path: Path, *command: str, nodes: int = 1, cpus: int | None = None) -> str:
    return render_script(
        SbatchRequest(job_name="t", nodes=nodes, command=command, cpus_per_task=cpus,
                      output=str(tmp_path / "rl-%j.out"), chdir=str(tmp_path))
    )  # fmt: skip


def ended(job_id: str) -> commands.JobInfo | None:
    info = commands.job_info(job_id)
    return info if info and info.state.ended else None


def test_a_job_is_followed_to_its_exit_code(cluster: SlurmCluster, tmp_path: Path) -> None:
    job_id = commands.submit(script(tmp_path, "bash", "-c", "echo out; exit 3", nodes=2))
    info = wait_until(lambda: ended(job_id), 60, "the job's end")
    assert info.job_id == job_id
    assert info.state is JobState.FAILED
    assert info.exit_code == 3
    assert info.nodes == ["rl1", "rl2"] and info.node_list == "rl[1-2]"
    assert info.stdout_path == str(tmp_path / f"rl-{job_id}.out")
    assert Path(info.stdout_path).read_text() == "out\n"
    assert info.start_time and info.end_time and info.restarts == 0


def test_cancel_ends_a_running_job_and_is_idempotent(cluster: SlurmCluster, tmp_path: Path) -> None:
    job_id = commands.submit(script(tmp_path, "sleep", "600"))
    wait_until(lambda: commands.job_info(job_id).state is JobState.RUNNING, 60, "running")
    commands.cancel(job_id)
    info = wait_until(lambda: ended(job_id), 60, "the job's end")
    assert info.state is JobState.CANCELLED
    commands.cancel(job_id)  # already ended: fine
    commands.cancel("999999")  # never existed: fine
    assert commands.job_info("999999") is None


def test_a_signal_reaches_the_batch_shell(cluster: SlurmCluster, tmp_path: Path) -> None:
    job_id = commands.submit(script(tmp_path, "bash", "-c", "echo up; exec sleep 600"))
    wait_until(lambda: commands.job_info(job_id).state is JobState.RUNNING, 60, "running")
    # RUNNING comes before slurmstepd has started the script: a signal sent then has no
    # shell to reach (seen once in a full run). Its first line says it is up.
    out = tmp_path / f"rl-{job_id}.out"
    wait_until(lambda: out.exists() and "up" in out.read_text(), 60, "the script up")
    commands.cancel(job_id, signal="TERM")
    info = wait_until(lambda: ended(job_id), 60, "the job's end")
    assert info.exit_code == 128 + 15


def test_partitions_and_hostnames(cluster: SlurmCluster) -> None:
    assert commands.partitions() == ["debug"]
    assert commands.hostnames("rl[1-3]") == ["rl1", "rl2", "rl3"]
    assert commands.hostnames("") == []


def test_slurm_refusals_name_the_command_and_slurm_words(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    bad = script(tmp_path, "true").replace("#SBATCH --nodes=1", "#SBATCH --partition=nope")
    with pytest.raises(SlurmError) as caught:
        commands.submit(bad)
    assert str(caught.value).startswith("sbatch failed: ")
    assert "Invalid partition name specified" in str(caught.value)
    assert "sinfo" in str(caught.value)  # the fix


def test_job_ids_reach_slurm_only_as_ids(cluster: SlurmCluster) -> None:
    with pytest.raises(ValueError, match="not a Slurm job id"):
        commands.cancel("--user=root")


def test_no_configuration_says_how_to_point_at_the_cluster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "missing.conf"))
    with pytest.raises(SlurmError) as caught:
        commands.partitions()
    assert str(caught.value).startswith(f"sinfo failed: SLURM_CONF={tmp_path}/missing.conf")


def test_a_missing_client_says_slurm_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SlurmError, match="Slurm's client is not installed") as caught:
        commands.submit("#!/bin/bash\ntrue\n")
    assert "SLURM_CONF" in str(caught.value)


def test_records_parse_without_slurm() -> None:
    line = ("JobId=7 JobName=a b JobState=CANCELLED Reason=None Restarts=2 ExitCode=0:9 "
            "NodeList=n[01-02] StdOut=/x y/o.out StartTime=2026-01-01T00:00:00 EndTime=Unknown")  # fmt: skip
    info = commands.parse_job_record(line)
    assert info.raw["JobName"] == "a b"
    assert info.state is JobState.CANCELLED and info.reason is None
    assert info.exit_code == 137 and info.restarts == 2
    assert info.nodes == ["n01", "n02"] and info.stdout_path == "/x y/o.out"
    assert info.end_time is None
    assert JobState.parse("SOMETHING_NEW") is JobState.UNKNOWN


def test_a_waiting_job_carries_slurm_reason(cluster: SlurmCluster, tmp_path: Path) -> None:
    from ringleader.slurm.reasons import pending_reason

    holder = commands.submit(script(tmp_path, "sleep", "600", cpus=4))  # all of one node
    wait_until(lambda: commands.job_info(holder).state is JobState.RUNNING, 60, "running")
    waiting = commands.submit(script(tmp_path, "true", nodes=3))
    info = wait_until(
        lambda: (i := commands.job_info(waiting)) and i.reason == "Resources" and i, 60, "reason"
    )
    assert info.state is JobState.PENDING and info.state.waiting and not info.state.ended
    assert pending_reason(info.reason).startswith("Resources: the nodes it asks for are busy")
    assert pending_reason("SomethingNew") == "SomethingNew (Slurm's reason)"


def test_a_job_only_accounting_remembers_is_read_from_sacct_lines() -> None:
    """slurmctld forgets a job after MinJobAge; sacct's record then tells how it ended."""
    line = "42|CANCELLED by 0|0:15|None|rl[1-2]|2026-11-24T05:00:00|2026-11-24T05:01:00"
    info = commands.parse_accounting_line(line)
    assert info is not None
    assert (info.job_id, info.state, info.exit_code) == ("42", JobState.CANCELLED, 128 + 15)
    assert info.nodes == ["rl1", "rl2"] and info.reason is None
    waiting = commands.parse_accounting_line(
        "43|PENDING|0:0|Resources|None assigned|Unknown|Unknown"
    )
    assert waiting is not None and waiting.state is JobState.PENDING
    assert waiting.nodes == [] and waiting.reason == "Resources" and waiting.start_time is None
    assert commands.parse_accounting_line("garbage") is None


def test_without_accounting_a_forgotten_job_is_unknown(cluster: SlurmCluster) -> None:
    """This cluster has no accounting database: sacct says so, and that is no error."""
    assert commands.accounted_job("999998") is None

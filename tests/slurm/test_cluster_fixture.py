"""The throw-away Slurm cluster itself: what every other Slurm test stands on."""

from __future__ import annotations

from tests.fixtures.slurmcluster import SlurmCluster


def test_srun_reaches_two_nodes(slurm: SlurmCluster) -> None:
    out = slurm.run("srun", "-N2", "--ntasks-per-node=1", "bash", "-c",
                    "echo $SLURMD_NODENAME $SLURM_CPUS_ON_NODE")  # fmt: skip
    assert sorted(out.split("\n")[:2]) == ["rl1 1", "rl2 1"]


def test_a_batch_job_runs_and_its_record_stays(slurm: SlurmCluster, tmp_path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH -N 1\n#SBATCH -o {tmp_path}/out.txt\necho done\n")
    job = slurm.run("sbatch", "--parsable", str(script)).strip()
    from tests.conftest import wait_until

    wait_until(lambda: slurm.job_field(job, "JobState") == "COMPLETED", 60, "the job's end")
    assert (tmp_path / "out.txt").read_text() == "done\n"
    assert slurm.job_field(job, "ExitCode") == "0:0"

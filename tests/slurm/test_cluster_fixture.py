"""The throw-away Slurm cluster itself: what every other Slurm test stands on."""

from __future__ import annotations

from pathlib import Path

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


def test_a_cluster_whose_starter_is_killed_leaves_no_daemon(slurm: SlurmCluster) -> None:
    """A benchmark or test killed outright (a timeout's SIGKILL) takes its daemons along."""
    import os
    import shutil
    import signal
    import subprocess
    import sys

    from tests.conftest import wait_until

    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    assert starter.stdout is not None
    root, *words = starter.stdout.readline().split()
    pids = [int(pid) for pid in words]
    assert len(pids) == 5 and all(_alive(pid) for pid in pids)  # munged, ctld, 3 slurmd
    os.kill(starter.pid, signal.SIGKILL)
    starter.wait()
    wait_until(lambda: not any(_alive(pid) for pid in pids), 60, "the daemons' end")
    shutil.rmtree(root)
    assert slurm.idle_nodes() == len(slurm.nodes)  # the session's cluster is untouched


STARTER = """
import tempfile, time
from pathlib import Path
from pathlib import Path

from tests.fixtures.slurmcluster import SlurmCluster
root = Path(tempfile.mkdtemp(prefix="rl-slurm-orphan-"))
cluster = SlurmCluster(root=root, conf=root / "slurm.conf")
cluster.start()
print(root, *cluster.pids, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][:1] != "Z"
    except FileNotFoundError:
        return False

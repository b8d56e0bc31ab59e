"""Real Horovod (0.28.1, built for TensorFlow 2.12 by ``make horovod``) under ringleader:
``launch --framework horovod`` and the ``horovodrun`` front end, in both of Horovod's
modes, train the digits across two ranks to what one rank reaches; a failing rank
ends the gang with its root cause and leaves nothing; two netns hosts meet over
their own interface.

With ``CI=true`` a missing Horovod environment fails (``horovod_python``), never skips.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import job_pids
from tests.fixtures.testhosts import (  # noqa: F401
    TestHostNetwork,
    make_test_hosts_fixture,
)

RL = [sys.executable, "-m", "ringleader", "launch"]
HOROVODRUN = [sys.executable, "-m", "ringleader.launch.horovodrun"]
DIGITS = ["-m", "ringleader.examples.horovod_digits", "--steps", "100"]


def _accuracy(output: str) -> float:
    found = re.findall(r"final test accuracy: ([0-9.]+)", output)
    assert len(found) == 1, output  # rank 0 alone says it
    return float(found[0])


def _run(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=env, check=False)  # fmt: skip
    if ok:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _horovod_env(horovod_python: str) -> dict[str, str]:
    """The caller's environment with Horovod's first on PATH (as after `activate`)."""
    bin_dir = str(Path(horovod_python).parent)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_launch_framework_horovod_trains_two_ranks_to_one_ranks_accuracy(
    horovod_python: str, tmp_path: Path
) -> None:
    alone = _run([horovod_python, *DIGITS], tmp_path)
    assert "ranks: 1" in alone.stdout, alone.stdout
    gang = _run([*RL, "-n", "2", "--framework", "horovod", "--", horovod_python, *DIGITS],
                tmp_path)  # fmt: skip
    assert "[0/2 localhost] ranks: 2" in gang.stdout, gang.stdout
    # Full-batch steps from rank 0's broadcast weights: where one rank's end.
    assert _accuracy(gang.stdout) == pytest.approx(_accuracy(alone.stdout), abs=0.003)
    assert _accuracy(alone.stdout) > 0.9


@pytest.mark.parametrize("mode", ["--gloo", "--mpi"])
def test_horovodrun_as_typed_runs_the_program_in_either_mode(
    horovod_python: str, mode: str, tmp_path: Path, mpirun_available: None
) -> None:
    """``horovodrun -np 2 python ...`` with Horovod's environment first on PATH: Gloo
    through ringleader's launch (its rank prefixes), MPI through mpirun (its tags)."""
    env = _horovod_env(horovod_python)
    done = _run([*HOROVODRUN, "-np", "2", mode, "--verbose", "python", *DIGITS], tmp_path, env)
    said = done.stderr.splitlines()[0]
    if mode == "--gloo":
        assert "launch --framework horovod -H localhost:2" in said, done.stderr
        assert "[0/2 localhost] ranks: 2" in done.stdout, done.stdout
    else:
        assert said.startswith("horovodrun: mpirun ") and "-bind-to none" in said, said
        assert "[1,0]<stdout>:ranks: 2" in done.stdout, done.stdout
    assert _accuracy(done.stdout) > 0.9


FAILS = """
import os, sys, time
import horovod.tensorflow as hvd
import tensorflow as tf
hvd.init()
hvd.allreduce(tf.constant(1.0))  # both met
if hvd.rank() == 1:
    print("rank 1: the shard is missing", file=sys.stderr, flush=True)
    sys.exit(3)
hvd.allreduce(tf.constant(2.0))  # waits for a peer that is gone
time.sleep(300)
"""


def test_a_failing_horovod_rank_ends_the_gang_with_its_cause_and_no_orphans(
    horovod_python: str, tmp_path: Path
) -> None:
    (tmp_path / "fails.py").write_text(FAILS)
    done = _run([*RL, "-n", "2", "--framework", "horovod", "--run-id", "rl-hvd-fails", "--",
                 horovod_python, "fails.py"], tmp_path, ok=False)  # fmt: skip
    assert done.returncode == 3, done.stderr[-3000:]
    assert "rank      : 1" in done.stderr and "the shard is missing" in done.stderr, done.stderr
    assert job_pids("rl-hvd-fails") == []


RESTARTS = """
import os, sys
import horovod.tensorflow as hvd
import tensorflow as tf
hvd.init()
total = float(hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum))
attempt = os.environ["RINGLEADER_RESTART_COUNT"]
if attempt == "0" and hvd.rank() == 1:
    sys.exit("rank 1: first attempt fails")
print(f"attempt {attempt} rank {hvd.rank()}: sum {total:g}", flush=True)
"""


def test_a_restarted_horovod_gang_meets_again_in_a_fresh_rendezvous(
    horovod_python: str, tmp_path: Path
) -> None:
    """Attempt 1 meets at a new store on a new port: nothing of attempt 0's is read."""
    (tmp_path / "restarts.py").write_text(RESTARTS)
    done = _run([*RL, "-n", "2", "--framework", "horovod", "--max-restarts", "1", "--",
                 horovod_python, "restarts.py"], tmp_path)  # fmt: skip
    assert "attempt 0 failed" in done.stderr, done.stderr
    for rank in (0, 1):
        assert f"attempt 1 rank {rank}: sum 3" in done.stdout, done.stdout + done.stderr


ACROSS = """
import os
import horovod.tensorflow as hvd
import tensorflow as tf
hvd.init()
total = hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum)
print(f"rank {hvd.rank()} of {hvd.size()}: local {hvd.local_rank()}/{hvd.local_size()} "
      f"cross {hvd.cross_rank()}/{hvd.cross_size()} iface {os.environ['HOROVOD_GLOO_IFACE']} "
      f"sum {float(total):g}", flush=True)
"""


@pytest.mark.multihost
def test_horovodrun_across_two_hosts_meets_over_their_interface(
    make_test_hosts, horovod_python: str, tmp_path: Path
) -> None:
    net: TestHostNetwork = make_test_hosts(2)
    (tmp_path / "across.py").write_text(ACROSS)
    hosts = ",".join(f"{h.address}:1" for h in net.hosts)
    env = {**_horovod_env(horovod_python), "RINGLEADER_SSH_CONFIG": str(net.ssh_config)}
    done = _run([*HOROVODRUN, "-np", "2", "-H", hosts, "python", "across.py"], tmp_path, env)
    for rank, host in enumerate(net.hosts):
        line = f"[{rank}/2 {host.address}] rank {rank} of 2: local 0/1 cross {rank}/2 iface eth0"
        assert f"{line} sum 3" in done.stdout, done.stdout + done.stderr[-2000:]

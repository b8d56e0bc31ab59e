"""Seed 001 (Run:AI's distributed-training walkthrough with ``submit-mpi``), as printed.

Each ``<pre>`` block is pasted into bash as the page renders it (``<br/>`` a line's
end), ``runai`` -> ``ringleader``, against one real server whose two simulated nodes
have a GPU each (``--simulate-nodes 2x1gpu``); the walkthrough's "Setup" (a project
``team-a`` with 2 GPUs, made in Run:AI's UI) is ``ringleader project create``. The
images are ringleader's stand-ins (the digits CNN under mpirun), and the server runs
from the virtualenv on ``PATH``, as after ``pip install`` in an activated venv.

What a user gets:

- ``submit-mpi dist``: a launcher and two worker pods, one per node, in ``list``,
  ``get`` and the merged ``logs``; ``delete`` frees the GPUs;
- the interactive ``<pre>`` as printed ends its first line with ``\\`` *and a space*
  (``\\ <br/>``): bash ends the command there with a ``' '`` word and runs the next
  line on its own (``-i: command not found``). ringleader refuses the blank command,
  saying to remove the space, and creates nothing; without the space it is submitted;
- ``bash dist-int`` on a real terminal, in the launcher pod: with Horovod's environment
  first on ``PATH`` (what the seed's image has: ``make horovod``'s Horovod 0.28.1 and
  TensorFlow 2.12), the seed's ``horovodrun -np 2 python scripts/tf_cnn_benchmarks/...``
  line as printed runs ringleader's ``horovodrun`` (MPI mode there: mpirun on the
  workers' slots) and a real Horovod program (a stand-in for tf_cnn_benchmarks doing one
  averaging ``hvd.allreduce``): both ranks agree;
- the same ``horovodrun`` line as an MPI workload's own command (the seed's image runs
  it at start) runs in the launcher pod and the workload completes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator

import pytest

from tests.conftest import HOROVOD_VENV, wait_until
from tests.fixtures.terminal import Terminal
from tests.seeds.usershell import UserShell, user_path
from tests.server.conftest import ServerProcess, account_home, stop_workloads

pytestmark = pytest.mark.usefixtures("mpirun_available", "horovod_python")

# <pre>runai project set team-a<br/><br/>runai submit-mpi dist --processes=2 -g 1
# -i gcr.io/run-ai-demo/quickstart-distributed </pre>
SUBMIT = (
    "ringleader project set team-a\n\n"
    "ringleader submit-mpi dist --processes=2 -g 1 -i gcr.io/run-ai-demo/quickstart-distributed "
)
# The interactive <pre>: "\ <br/>" (a backslash, a space, the line's end), then "  \<br/>".
INTERACTIVE = (
    "ringleader submit-mpi dist-int --processes=2 -g 1 \\ \n"
    "   -i gcr.io/run-ai-demo/quickstart-distributed  \\\n"
    '   --command="sh" --args="-c" --args="sleep infinity"  --interactive'
)
HOROVOD = (  # typed in the launcher pod
    "horovodrun -np 2 python scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py \\\n"
    " --model=resnet20 --num_batches=1000000 --data_name cifar10 \\\n"
    " --data_dir /cifar10 --batch_size=64 --variable_update=horovod"
)
TF_CNN_BENCHMARKS = '''\
"""Stands in for tf_cnn_benchmarks.py: one Horovod step, each rank's gradient averaged
over the world by Horovod's allreduce (TensorFlow 2.12, Horovod 0.28.1)."""
import argparse, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import horovod.tensorflow as hvd
import tensorflow as tf

parser = argparse.ArgumentParser()
for flag in ("--model", "--num_batches", "--data_name", "--data_dir", "--batch_size",
             "--variable_update"):
    parser.add_argument(flag)
args = parser.parse_args()
hvd.init()
averaged = hvd.allreduce(tf.constant([float(hvd.rank() + 1)]))  # Average, Horovod's default
seen = hvd.allgather(averaged).numpy().tolist()
if hvd.rank() == 0:
    print(f"{args.model} on {args.data_name}, {args.variable_update} over "
          f"{hvd.size()} ranks: averaged gradient per rank {seen}", flush=True)
'''
SAID = "resnet20 on cifar10, horovod over 2 ranks: averaged gradient per rank [1.5, 1.5]"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UserShell]:
    """The admin's shell on the server's machine (``RINGLEADER_HOME`` is the server's)."""
    root = tmp_path_factory.mktemp("seed001")
    server = ServerProcess(root / "home", "--simulate-nodes", "2x1gpu")
    # Started as `ringleader server` is, by an account whose home is the test's (the
    # pods' too: `bash dist-int` reads its ~/.bashrc; account_home says why).
    home = account_home(root / "account")
    server.env = {**server.env, "PATH": user_path(), "HOME": str(home)}
    server.start()
    workdir = root / "work"
    (workdir / "scripts/tf_cnn_benchmarks").mkdir(parents=True)
    (workdir / "scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py").write_text(TF_CNN_BENCHMARKS)
    env = {**server.env, "COLUMNS": "80", "TERM": "dumb"}
    try:
        made = server.cli("project", "create", "team-a", "--gpu", "2")  # the UI's "Setup"
        assert made.returncode == 0, made.stderr
        yield UserShell(workdir, env)
    finally:
        server.kill()
        stop_workloads(server.home)


def test_training_workload_list_get_logs_delete(site: UserShell) -> None:
    submitted = site.paste(SUBMIT)
    assert submitted.returncode == 0, submitted.stderr
    assert "Project 'team-a' has been set as the default project" in submitted.stdout
    assert "The workload 'dist' has been submitted successfully" in submitted.stdout

    pods = site.wait_running("dist", 3)
    listed = site.paste("ringleader list").stdout
    assert re.search(r"^ dist\s+Running\s.*MPI distributed\s+2 \(2\)\s+3 \(0\)", listed, re.M), (
        listed
    )
    # "You will see two worker processes (pods) their status and on which node they run"
    assert set(pods) == {"dist-launcher", "dist-worker-0", "dist-worker-1"}, pods
    assert {pods["dist-worker-0"][1], pods["dist-worker-1"][1]} == {"sim-0", "sim-1"}
    got = site.paste("ringleader get dist ").stdout
    assert "Image: gcr.io/run-ai-demo/quickstart-distributed" in got
    assert "Horovod quickstart stand-in" in " ".join(got.split())  # the event says so

    def training() -> str:
        merged = site.paste("ringleader logs dist").stdout
        return merged if "[dist-worker-0] epoch 1/10: train loss" in merged else ""

    wait_until(training, 240, "the stand-in's first epoch in the merged logs")

    deleted = site.paste("ringleader delete dist")
    assert deleted.returncode == 0 and "The workload 'dist' is being deleted" in deleted.stdout
    wait_until(lambda: site.paste("ringleader get dist").returncode != 0, 60, "dist gone")


def test_interactive_workload_then_a_horovod_style_run_from_bash(site: UserShell) -> None:
    pasted = site.paste(INTERACTIVE)
    assert pasted.returncode == 127, pasted  # bash: the second line alone
    assert "-i: command not found" in pasted.stderr
    said = " ".join(pasted.stderr.split())
    assert "the workload's command starts with a blank word (' ')" in said, pasted.stderr
    assert "Remove the space after the backslash" in said and "Traceback" not in said
    assert "dist-int" not in site.paste("ringleader list").stdout  # nothing created

    fixed = site.paste(INTERACTIVE.replace("\\ \n", "\\\n", 1))  # as the error says
    assert fixed.returncode == 0, fixed.stderr
    assert "The workload 'dist-int' has been submitted successfully" in fixed.stdout
    for step in ("describe dist-int", "logs dist-int -f", "bash dist-int", "delete dist-int"):
        assert f"ringleader {step}" in fixed.stdout, fixed.stdout  # the next steps, printed
    # The GPUs of `dist` (deleted above, or still going if run alone) come back first.
    pods = site.wait_running("dist-int", 3)
    assert {pods["dist-int-worker-0"][1], pods["dist-int-worker-1"][1]} == {"sim-0", "sim-1"}
    described = site.paste("ringleader describe dist-int").stdout
    command = re.search(r"^Command: (.*)$", described, re.M)
    assert command and shlex.split(command.group(1)) == ["sh", "-c", "sleep infinity"], described
    spec = json.loads(site.paste("ringleader describe dist-int -o json").stdout)["spec"]["spec"]
    assert (spec["numWorkers"], spec["interactive"], spec["compute"]) == (
        2, True, {"gpuDevicesRequest": 1}
    ), spec  # fmt: skip
    assert spec["image"] == "gcr.io/run-ai-demo/quickstart-distributed"

    with Terminal(["ringleader", "bash", "dist-int"], site.env, cwd=str(site.workdir)) as shell:
        shell.expect(r"\(dist-int/launcher\) ")  # the prompt names workload and pod
        workers = shell.run("echo $RUNAI_MPI_NUM_WORKERS")
        assert workers.rc == 0 and re.search(r"^2$", workers.out, re.M), workers
        # Ranks started from here share the cores as the workload's own ranks do (2 on
        # this machine's cores): before, they each took every core, and ran 3x slower.
        threads = shell.run("echo threads=$OMP_NUM_THREADS")
        cores = len(os.sched_getaffinity(0))
        assert f"threads={max(1, cores // 2)}" in threads.out, threads
        # The seed's image has Horovod's Python first on PATH: so has this shell.
        assert shell.run(f"export PATH={HOROVOD_VENV / 'bin'}:$PATH").rc == 0
        horovod = shell.run(HOROVOD, timeout=180)  # as printed
        assert horovod.rc == 0, shell.transcript
        assert SAID in horovod.out, shell.transcript
        assert "[1,0]<stdout>:" in horovod.out  # mpirun's tags: MPI mode in a launcher pod
        shell.type("exit\n")
        assert shell.wait() == 0, shell.transcript

    deleted = site.paste("ringleader delete dist-int")
    assert deleted.returncode == 0, deleted.stderr


def test_horovodrun_as_the_mpi_workloads_own_command_runs_in_its_launcher(
    site: UserShell,
) -> None:
    """The seed's image starts ``horovodrun -np $RUNAI_MPI_NUM_WORKERS python ...``: as an
    MPI workload's command it runs in the launcher pod (not once per rank), and mpirun
    starts the two ranks."""
    path = f"{HOROVOD_VENV / 'bin'}:{site.env['PATH']}"
    command = HOROVOD.replace("-np 2", "-np $RUNAI_MPI_NUM_WORKERS").replace("\\\n", "")
    submitted = site.paste(
        f"ringleader submit-mpi dist-own --processes=2 -e PATH={shlex.quote(path)} "
        f"-- sh -c {shlex.quote(command)}"
    )
    assert submitted.returncode == 0, submitted.stderr

    def ended() -> str:
        got = site.paste("ringleader describe dist-own -o json")
        phase = json.loads(got.stdout)["actualPhase"] if got.returncode == 0 else ""
        return phase if phase in ("Completed", "Failed") else ""

    assert wait_until(ended, 240, "dist-own ended") == "Completed", site.paste(
        "ringleader logs dist-own"
    ).stdout
    logs = site.paste("ringleader logs dist-own").stdout
    assert logs.count(SAID) == 1, logs  # one horovodrun, rank 0 said it once
    deleted = site.paste("ringleader delete dist-own")
    assert deleted.returncode == 0, deleted.stderr

"""``ringleader launch`` inside a Slurm allocation: ranks on its nodes, agents as srun steps.

The real cluster (``tests/fixtures/slurmcluster.py``: rl1..rl3, all at 127.0.0.1) runs
the launches; the pure parts (the node list, the tasks per node, srun's argv and the
environment a rank gets) are tested without it.  No test asserts a duration.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from ringleader.errors import InvalidSpec
from ringleader.launch import prestart
from ringleader.launch import slurm_env as step
from ringleader.launch import slurm_srun as srun
from ringleader.launch.command import parse_quick
from ringleader.launch.options import build_spec
from ringleader.runtime.env import detect
from ringleader.slurm import allocation
from tests.conftest import RINGLEADER, job_pids, wait_until
from tests.fixtures.slurmcluster import SlurmCluster

TIMEOUT_S = 180
DIGITS = ["python", "-m", "ringleader.examples.digits", "--epochs", "1", "--max-steps", "5"]


# ----- pure: the allocation, srun's argv, the step's environment ----------------------------
def fake_scontrol(nodes: dict[str, str]):
    """A ``Runner`` answering ``scontrol show hostnames|node`` for ``nodes`` (name -> addr)."""
    calls: list[list[str]] = []

    def run(argv: list[str]) -> str:
        calls.append(argv)
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            return "\n".join(nodes) + "\n"
        if argv[:3] == ["scontrol", "show", "node"]:
            return "".join(
                f"NodeName={n} Arch=x86_64 NodeAddr={a} State=IDLE\n" for n, a in nodes.items()
            )
        raise AssertionError(argv)

    run.calls = calls  # type: ignore[attr-defined]
    return run


def test_outside_slurm_there_is_no_allocation() -> None:
    assert allocation.detect({"PATH": "/usr/bin"}, run=fake_scontrol({})) is None


def test_the_allocation_nodes_addresses_and_tasks(monkeypatch) -> None:
    monkeypatch.setattr(allocation.shutil, "which", lambda name: f"/usr/bin/{name}")
    run = fake_scontrol({"gpu01": "10.0.0.1", "gpu02": "10.0.0.2"})
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_TASKS_PER_NODE": "3,1"}
    found = allocation.detect(env, run=run)
    assert found is not None
    assert (found.job_id, found.nodes, found.addresses) == (
        "42",
        ("gpu01", "gpu02"),
        ("10.0.0.1", "10.0.0.2"),
    )
    assert (found.tasks_per_node, found.tasks_from) == ((3, 1), "SLURM_TASKS_PER_NODE")
    assert run.calls == [  # type: ignore[attr-defined]
        ["scontrol", "show", "hostnames", "gpu[01-02]"],
        ["scontrol", "show", "node", "-o", "gpu[01-02]"],
    ]
    uniform = allocation.detect({**env, "SLURM_NTASKS_PER_NODE": "2"}, run=run)
    assert uniform is not None and uniform.tasks_per_node == (2, 2)
    flag = allocation.detect(env, nproc_per_node=4, run=run)
    assert flag is not None and (flag.tasks_per_node, flag.tasks_from) == (
        (4, 4),
        "--nproc-per-node",
    )
    bare = allocation.detect({"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "gpu[01-02]"}, run=run)
    assert bare is not None and bare.tasks_per_node == (1, 1)
    spec = build_spec(["python", "t.py"], allocation=flag, run_id="rl-x")
    assert spec.slurm_job == "42" and spec.world_size == 8
    assert [(h.name, h.address, h.slots) for h in spec.hosts] == [
        ("gpu01", "10.0.0.1", 4),
        ("gpu02", "10.0.0.2", 4),
    ]
    explicit = build_spec(["python", "t.py"], hosts_flag="a:1", allocation=flag, run_id="rl-x")
    assert explicit.slurm_job == "" and [h.name for h in explicit.hosts] == ["a"]


@pytest.mark.parametrize(
    ("env", "where"),
    [
        ({"SLURM_JOB_NODELIST": "rl[1-"}, "SLURM_JOB_NODELIST"),
        ({"SLURM_JOB_NODELIST": "rl[3-1]"}, "SLURM_JOB_NODELIST"),
        ({"SLURM_JOB_NODELIST": "n[1-99999999]"}, "SLURM_JOB_NODELIST"),
        ({"SLURM_JOB_NODELIST": "-x,rl1"}, "SLURM_JOB_NODELIST"),
        ({}, "SLURM_JOB_NODELIST"),
        ({"SLURM_JOB_NODELIST": "rl[1-2]", "SLURM_JOB_ID": "12;rm"}, "SLURM_JOB_ID"),
        (
            {"SLURM_JOB_NODELIST": "rl[1-2]", "SLURM_TASKS_PER_NODE": "2(x3)"},
            "SLURM_TASKS_PER_NODE",
        ),
        ({"SLURM_JOB_NODELIST": "rl[1-2]", "SLURM_NTASKS_PER_NODE": "0"}, "SLURM_NTASKS_PER_NODE"),
    ],
)
def test_a_broken_allocation_is_refused_naming_the_variable(monkeypatch, env, where) -> None:
    monkeypatch.setattr(allocation.shutil, "which", lambda name: f"/usr/bin/{name}")
    with pytest.raises(InvalidSpec) as err:
        allocation.detect({"SLURM_JOB_ID": "7", **env}, run=fake_scontrol({"rl1": "a", "rl2": "b"}))
    assert err.value.where == where


def test_mpirun_frameworks_are_refused_inside_an_allocation() -> None:
    from ringleader.launch.command import check_slurm_framework

    check_slurm_framework("pytorch")
    with pytest.raises(InvalidSpec) as err:
        check_slurm_framework("mpi")
    assert err.value.where == "--framework" and "--no-slurm" in str(err.value)


def test_a_job_slurm_ended_is_named_once_it_settles() -> None:
    states = iter(["COMPLETING", "COMPLETING", "TIMEOUT"])

    def run(argv: list[str]) -> str:
        assert argv == ["scontrol", "show", "job", "-o", "42"]
        return f"JobId=42 JobName=t JobState={next(states)} Reason=None\n"

    said = allocation.ended_by_slurm("42", run=run)
    assert (
        said
        == "Slurm ended job 42 (TIMEOUT: its time limit was reached); the ranks did not fail on their own"
    )
    running = allocation.ended_by_slurm("42", run=lambda argv: "JobId=42 JobState=RUNNING\n")
    assert running is None


def test_srun_argv_runs_one_unbound_overlapping_agent_step() -> None:
    argv = srun.agent_step_argv("42", "gpu02", python="/venv/bin/python", run_id="rl-abc")
    assert argv == [
        "srun", "--jobid=42", "--nodes=1", "--ntasks=1", "--nodelist=gpu02", "--overlap",
        "--cpu-bind=none", "--mem=0", "--kill-on-bad-exit=1", "--mpi=none", "--export=ALL",
        "--input=all", "--job-name=ringleader-agent", "--quiet",
        "/venv/bin/python", "-m", "ringleader.launch.slurm_step", "--job-id", "rl-abc",
    ]  # fmt: skip
    with pytest.raises(ValueError):
        srun.agent_step_argv("42", "--uid=0", python="p", run_id="r")


def test_a_rank_sees_the_job_not_the_agents_step() -> None:
    """srun gets no option-like names; the step's identity is dropped; the job's comes back."""
    launcher = {
        "PATH": "/usr/bin",
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NAME": "train",
        "SLURM_NNODES": "2",
        "SLURM_NTASKS": "4",
        "SLURM_NTASKS_PER_NODE": "2",
        "SLURM_TASKS_PER_NODE": "2(x2)",
        "SLURM_GPUS_PER_TASK": "1",
        "SLURM_PROCID": "0",  # the batch step's
    }
    to_srun = srun.srun_env(launcher)
    assert not {"SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_GPUS_PER_TASK"} & set(to_srun)
    # what slurmstepd gives the agent's one task on the second node
    in_step = {
        **to_srun,
        "SLURM_NNODES": "1", "SLURM_NODELIST": "gpu02", "SLURM_TASKS_PER_NODE": "1",
        "SLURM_JOB_NAME": "ringleader-agent", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
        "SLURM_NODEID": "0", "SLURM_NTASKS": "1", "SLURM_NPROCS": "1", "SLURM_STEP_ID": "3",
        "SLURM_STEPID": "3", "SLURM_STEP_NODELIST": "gpu02", "SLURM_CPU_BIND": "quiet,none",
        "SLURM_GTIDS": "0", "SLURM_TASK_PID": "99", "SLURMD_NODENAME": "gpu02",
        "SLURM_CPUS_ON_NODE": "8",
    }  # fmt: skip
    step.scrub(in_step)
    assert {k: v for k, v in in_step.items() if k.startswith("SLURM")} == {
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NAME": "train",
        "SLURM_NNODES": "2",
        "SLURM_NTASKS_PER_NODE": "2",
        "SLURM_TASKS_PER_NODE": "2(x2)",
        "SLURM_GPUS_PER_TASK": "1",
        "SLURMD_NODENAME": "gpu02",
        "SLURM_CPUS_ON_NODE": "8",
    }
    assert step.JOB_ENV not in in_step


def test_no_slurm_is_a_quick_flag_and_no_agent_starts_ahead_inside_slurm(monkeypatch) -> None:
    args = parse_quick(["--no-slurm", "--", "python", "t.py"])
    assert args is not None and args.no_slurm
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert not prestart.wants_local_agent(["--", "python", "t.py"])
    assert prestart.wants_local_agent(["--no-slurm", "--", "python", "t.py"])


# ----- bad input through the real CLI (no cluster needed) -----------------------------------
def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RINGLEADER, "launch", *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_a_malformed_node_list_or_a_missing_scontrol_is_one_line_and_exit_2(tmp_path) -> None:
    base = {**os.environ, "SLURM_JOB_ID": "7"}
    bad = _cli("--", "python", "-c", "pass", env={**base, "SLURM_JOB_NODELIST": "rl[1-"})
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip().splitlines() == [
        "ringleader: error: SLURM_JOB_NODELIST: malformed Slurm node list 'rl[1-': unbalanced '['"
    ]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "srun").chmod(0o755)
    env = {**base, "SLURM_JOB_NODELIST": "rl[1-2]", "PATH": str(bin_dir)}
    missing = _cli("--", "python", "-c", "pass", env=env)
    assert missing.returncode == 2, missing.stderr
    lines = missing.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ringleader: error: scontrol: not found on PATH")
    assert "Traceback" not in bad.stderr + missing.stderr


# ----- the real cluster ---------------------------------------------------------------------
def gang_pids(run_id: str) -> list[int]:
    """Every live process of the launch: ranks (by env), agents and srun (by command line)."""
    pids = set(job_pids(run_id))
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if (
            run_id.encode() in words
            and state != "Z"
            and (
                b"ringleader.launch.slurm_step" in words
                or Path(words[0].decode(errors="replace")).name == "srun"
            )
        ):
            pids.add(int(entry.name))
    return sorted(pids)


def salloc(slurm: SlurmCluster, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``salloc ARGS`` (an allocation's command) run to its end."""
    return subprocess.run(
        ["salloc", *args], capture_output=True, text=True, timeout=TIMEOUT_S, env=slurm.env, cwd=cwd
    )


def allocate(slurm: SlurmCluster, nodes: int) -> tuple[str, dict[str, str]]:
    """An allocation held with no shell, and the environment a command inside it has."""
    out = subprocess.run(
        ["salloc", "--no-shell", f"-N{nodes}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=slurm.env,
    )
    match = re.search(r"Granted job allocation (\d+)", out.stderr)
    assert match, out.stderr
    job = match.group(1)
    nodelist = slurm.job_field(job, "NodeList")
    return job, {**slurm.env, "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": nodelist}


def test_digits_on_two_nodes_inside_salloc(slurm: SlurmCluster, tmp_path: Path) -> None:
    proc = salloc(
        slurm, tmp_path, "-N", "2", *RINGLEADER, "launch", "--nproc-per-node", "1", "--", *DIGITS
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"in Slurm job \d+: 2 nodes rl\[1-2\]", proc.stderr), proc.stderr
    assert "rl1: ranks 0," in proc.stderr and "rl2: ranks 1," in proc.stderr, proc.stderr
    assert re.search(r"^\[0/2 rl1\] epoch 1/1: train loss", proc.stdout, re.M), proc.stdout
    assert re.search(r"^\[0/2 rl1\] final test accuracy", proc.stdout, re.M), proc.stdout


def test_an_sbatch_script_is_ringleader_launch(slurm: SlurmCluster, tmp_path: Path) -> None:
    body = " ".join([*RINGLEADER, "launch", "--", *DIGITS])
    script = tmp_path / "train.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH -N 2\n#SBATCH -o {tmp_path}/out.txt\n{body}\n")
    job = slurm.run("sbatch", "--parsable", "--chdir", str(tmp_path), str(script)).strip()
    wait_until(
        lambda: slurm.job_field(job, "JobState") in ("COMPLETED", "FAILED"),
        TIMEOUT_S,
        "the job's end",
    )
    out = (tmp_path / "out.txt").read_text()
    assert slurm.job_field(job, "JobState") == "COMPLETED", out
    assert f"in Slurm job {job}: 2 nodes" in out and "rl2: ranks 1," in out, out
    assert re.search(r"^\[0/2 rl1\] final test accuracy", out, re.M), out


def test_each_rank_gets_its_place_and_not_the_steps(
    slurm: SlurmCluster, tmp_path: Path, script
) -> None:
    """Tasks per node from the allocation; torchrun's names; no SLURM_PROCID of the step."""
    path = script(
        "import json, os\n"
        "from ringleader.runtime.env import detect\n"
        "e = detect(os.environ)\n"
        "print('ENV ' + json.dumps({'env': dict(os.environ), 'detect': [e.source, e.rank, e.world_size, e.local_rank]}))\n"
    )
    proc = salloc(
        slurm,
        tmp_path,
        "-N",
        "2",
        "--ntasks-per-node",
        "2",
        *RINGLEADER,
        "launch",
        "--",
        "python",
        path,
    )
    assert proc.returncode == 0, proc.stderr
    seen = {}
    for line in proc.stdout.splitlines():
        prefix, _, data = line.partition(" ENV ")
        if data:
            seen[prefix] = json.loads(data)
    assert sorted(seen) == ["[0/4 rl1]", "[1/4 rl1]", "[2/4 rl2]", "[3/4 rl2]"], proc.stdout
    master = slurm.run("scontrol", "show", "node", "-o", "rl1").split("NodeAddr=")[1].split()[0]
    job = re.search(r"in Slurm job (\d+)", proc.stderr).group(1)
    for prefix, got in seen.items():
        env, rank = got["env"], int(prefix[1])
        assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == (
            str(rank),
            str(rank % 2),
            "4",
        )
        assert env["MASTER_ADDR"] == master and env["SLURMD_NODENAME"] == f"rl{rank // 2 + 1}"
        assert got["detect"] == ["ringleader", rank, 4, rank % 2]
        assert (
            detect({k: v for k, v in env.items() if not k.startswith("RINGLEADER_")}).rank == rank
        )
        leaked = [k for k in env if k in step.STEP_NAMES or k.startswith("SLURM_STEP")]
        assert leaked == [], leaked
        assert (env["SLURM_JOB_ID"], env["SLURM_NNODES"]) == (job, "2")
        assert env["SLURM_JOB_NAME"] == slurm.job_field(job, "JobName")  # the job's, not the step's
    ports = {got["env"]["MASTER_PORT"] for got in seen.values()}
    assert len(ports) == 1


def test_a_failing_rank_on_node_2_ends_the_gang_with_its_root_cause(
    slurm: SlurmCluster, tmp_path: Path, script
) -> None:
    path = script(
        "import os, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    raise RuntimeError('boom on the second node')\n"
        "time.sleep(300)\n"
    )
    proc = salloc(
        slurm,
        tmp_path,
        "-N",
        "2",
        *RINGLEADER,
        "launch",
        "--run-id",
        "rl-si-fail",
        "--",
        "python",
        path,
    )
    assert proc.returncode == 1, proc.stderr
    summary = proc.stderr[proc.stderr.index("Root Cause") :]
    assert "host      : rl2" in summary and "rank      : 1" in summary, proc.stderr
    assert "RuntimeError: boom on the second node" in summary, proc.stderr
    wait_until(lambda: not gang_pids("rl-si-fail"), 30, "no process of the gang")
    wait_until(lambda: not slurm.jobs(), 30, "the allocation's end")


def test_restart_gets_a_fresh_rendezvous_on_the_nodes(
    slurm: SlurmCluster, tmp_path: Path, script
) -> None:
    path = script(
        "import os, sys\n"
        "attempt = os.environ['RINGLEADER_RESTART_COUNT']\n"
        "print('ATTEMPT', attempt, os.environ['MASTER_PORT'], flush=True)\n"
        "if attempt == '0' and os.environ['RANK'] == '1':\n"
        "    sys.exit(3)\n"
    )
    proc = salloc(
        slurm,
        tmp_path,
        "-N",
        "2",
        *RINGLEADER,
        "launch",
        "--max-restarts",
        "1",
        "--",
        "python",
        path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "attempt 0 failed: rank 1 on rl2: exit code 3; restarting the gang (1/1)" in proc.stderr
    ports = dict(re.findall(r"^\[[01]/2 rl[12]\] ATTEMPT (\d) (\d+)$", proc.stdout, re.M))
    assert set(ports) == {"0", "1"} and ports["0"] != ports["1"], proc.stdout


@pytest.mark.parametrize("end", ["scancel", "kill -9 of the launcher"])
def test_no_process_outlives_the_launch(
    slurm: SlurmCluster, tmp_path: Path, script, end: str
) -> None:
    path = script("import os, time\nprint('ready', flush=True)\ntime.sleep(300)\n")
    job, env = allocate(slurm, 2)
    run_id = f"rl-si-{end.split()[0]}"
    launcher = subprocess.Popen(
        [*RINGLEADER, "launch", "--run-id", run_id, "--", "python", path],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        for _ in range(2):
            line = launcher.stdout.readline()
            assert "ready" in line, line + launcher.stderr.read()
        if end == "scancel":
            slurm.run("scancel", job)
            assert launcher.wait(timeout=60) != 0
            said = launcher.stderr.read()
            assert f"Slurm ended job {job} (CANCELLED: by scancel or an administrator)" in said, (
                said
            )
        else:
            launcher.send_signal(signal.SIGKILL)
            launcher.wait(timeout=10)
        wait_until(lambda: not gang_pids(run_id), 30, f"no process of the gang after {end}")
        if end != "scancel":  # ringleader's own doing: the allocation lives on
            assert slurm.job_field(job, "JobState") == "RUNNING"
    finally:
        if launcher.poll() is None:
            launcher.kill()
        launcher.wait(timeout=10)

"""MPI workloads through a real server: what their pods have (seed 001), how they fail.

Seed 001's second part, as a user types it: an interactive MPI workload, then
`bash` into its launcher pod and start the gang there with mpirun, using the
pod's `RUNAI_MPI_NUM_WORKERS` and hostfile.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.fixtures.tenants import (
    Site,
    tenant_site,  # noqa: F401 (the fixture: site)
)
from tests.fixtures.terminal import Terminal
from tests.server.conftest import ServerProcess, account_home

pytestmark = pytest.mark.usefixtures("mpirun_available")
KEEP_ENV = "env > {dir}/rank-$RANK.env; exec sleep infinity"
MPI_HELLO = """\
import os
from mpi4py import MPI
world = MPI.COMM_WORLD
line = f"hello {world.Get_rank()} of {world.Get_size()} {os.environ['RUNAI_JOB_NAME']}\\n"
os.write(1, line.encode())  # one write: unbuffered print() writes word by word, and ranks interleave
"""


def _describe(server: ServerProcess, name: str) -> str:
    return server.cli("describe", name).stdout


def _pods_running(server: ServerProcess, name: str, count: int) -> None:
    def running() -> bool:
        out = _describe(server, name)
        return len(re.findall(rf"^\s*{name}-\S+\s+\S+\s+Running\b", out, re.M)) == count

    wait_until(running, 90, f"{count} running pods of {name}")


@pytest.fixture
def dist_int(server: ServerProcess, tmp_path: Path) -> str:
    """Seed 001's interactive MPI workload, whose ranks also write down their env."""
    command = KEEP_ENV.format(dir=tmp_path)
    sub = server.cli(
        "submit-mpi", "dist-int", "--processes=2", "-i", "gcr.io/run-ai-demo/quickstart-distributed",
        "--command=sh", "--args=-c", f"--args={command}", "--interactive",
    )  # seed 001's form: with -i, words after -- would be the image command's arguments  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    _pods_running(server, "dist-int", 3)
    wait_until(lambda: len(list(tmp_path.glob("rank-*.env"))) == 2, 30, "both ranks' env")
    return "dist-int"


def _env(text: str) -> dict[str, str]:
    """``env`` output as a map (values may hold newlines: RINGLEADER_NODE_IPS)."""
    found: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            key, found[name] = name, value
        elif key is not None:
            found[key] += "\n" + line
    return found


SHELL_OWN = {"PWD", "OLDPWD", "SHLVL", "_"}  # what a shell sets for itself


def test_the_launcher_pod_has_run_ais_variables_and_the_gangs_hostfile(
    server: ServerProcess, dist_int: str
) -> None:
    done = server.cli(
        "exec", dist_int, "--", "sh", "-c",
        'echo "$RUNAI_MPI_NUM_WORKERS $RUNAI_JOB_NAME $RUNAI_PROJECT $RINGLEADER_POD"; '
        'cat "$RINGLEADER_HOSTFILE"',
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["2 dist-int default dist-int-launcher", "localhost slots=2"]


def test_mpirun_from_bash_in_the_launcher_starts_the_gang_on_the_workers_slots(
    server: ServerProcess, dist_int: str, tmp_path: Path
) -> None:
    """Seed 001: `runai bash dist-int`, then a horovodrun-style mpirun there."""
    hello = tmp_path / "hello.py"
    hello.write_text(MPI_HELLO)
    script = (
        f"mpirun -np $RUNAI_MPI_NUM_WORKERS --hostfile $RINGLEADER_HOSTFILE -bind-to none "
        f"-map-by slot -x PATH -mca pml ob1 {sys.executable} {hello}\n"
    )
    shell = subprocess.run(
        [sys.executable, "-m", "ringleader", "bash", dist_int],
        input=script,
        env=server.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shell.returncode == 0, shell.stderr
    assert sorted(ln for ln in shell.stdout.splitlines() if ln.startswith("hello")) == [
        "hello 0 of 2 dist-int", "hello 1 of 2 dist-int"
    ]  # fmt: skip


def test_exec_into_a_worker_sees_exactly_its_ranks_environment(
    server: ServerProcess, dist_int: str, tmp_path: Path
) -> None:
    for rank, pod in ((0, "worker-0"), (1, "worker-1")):
        done = server.cli("exec", dist_int, "--pod", pod, "--", "env")
        assert done.returncode == 0, done.stderr
        seen = _env(done.stdout)
        own = _env((tmp_path / f"rank-{rank}.env").read_text())
        assert "RINGLEADER_RANK_ENV" not in seen
        assert (seen["RANK"], seen["WORLD_SIZE"], seen["LOCAL_RANK"]) == (str(rank), "2", str(rank))
        assert (seen["RUNAI_JOB_NAME"], seen["RINGLEADER_POD"]) == ("dist-int", f"dist-int-{pod}")
        assert {k: v for k, v in seen.items() if k not in SHELL_OWN} == {
            k: v for k, v in own.items() if k not in SHELL_OWN
        }


def test_an_mpi_command_that_does_not_exist_fails_with_its_root_cause_after_backoff(
    server: ServerProcess,
) -> None:
    sub = server.cli(
        "submit-mpi", "nocmd", "--processes", "2", "--backoff-limit", "1", "--", "nosuchcmd"
    )
    assert sub.returncode == 0, sub.stderr
    wait_until(lambda: "Status: Failed" in _describe(server, "nocmd"), 90, "Failed")
    out = _describe(server, "nocmd")
    assert "supervisor died" not in out, out
    assert re.search(r"Restarts: 1\b", out), out  # backoffLimit 1: one restart
    assert "exit code 127" in out and "nosuchcmd: not found" in out, out
    logs = server.cli("logs", "nocmd").stdout
    assert "RINGLEADER-RANK-EXIT" not in logs and "Traceback" not in logs


def test_bash_in_the_launcher_names_its_pod_and_says_why_it_ended(
    server: ServerProcess, tmp_path: Path
) -> None:
    home = account_home(tmp_path / "account")  # (its ~/.bashrc: account_home says why)
    sub = server.cli(
        "submit-mpi", "dist-int", "--processes=2", "--interactive", "-e", f"HOME={home}",
        "--", "sh", "-c", "sleep infinity",
    )  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    _pods_running(server, "dist-int", 3)
    argv = [sys.executable, "-m", "ringleader", "bash", "dist-int"]
    with Terminal(argv, {**server.env, "TERM": "dumb"}) as shell:
        shell.expect(re.escape("(dist-int/launcher) "))  # the prompt names workload and pod
        shell.type("echo workers=$RUNAI_MPI_NUM_WORKERS\n")
        shell.expect("workers=2")
        assert server.cli("delete", "dist-int").returncode == 0
        shell.expect("workload dist-int was deleted")
        assert shell.wait() == 137, shell.transcript  # 128 + SIGKILL, as a shell reports it


def test_mpi_ranks_follow_their_pods_nodes_and_the_launcher_gets_where_it_is() -> None:
    """A spread placement alternates nodes; mpirun's hostfile has one line per machine and
    fills them in order, so ranks are numbered by node for each to run where its pod
    (its devices) was placed; mpirun's own pod gets its place, not a device binding."""
    import json

    from ringleader.hosts import Host
    from ringleader.launch.mpirun import mpirun_argv
    from ringleader.launch.plan import RANK_ENV
    from ringleader.launch.ssh import SSHOptions
    from ringleader.sched import GpuShare
    from ringleader.server.backends.base import BackendRequest, PodPlacement
    from ringleader.server.backends.ssh import NodeBook, SSHBackend, SSHNode
    from tests.helpers.local_backend import PY, make_request

    request = make_request(
        "/runs/w5", name="sp", workers=3, workload_id="w5", command="python t.py",
        distributedFramework="MPI",
    )  # fmt: skip
    placements = {
        "sp-launcher": PodPlacement("gpu1", "ssh"),
        "sp-worker-0": PodPlacement("gpu1", "ssh", (GpuShare(0),)),
        "sp-worker-1": PodPlacement("gpu2", "ssh", (GpuShare(0),)),
        "sp-worker-2": PodPlacement("gpu1", "ssh", (GpuShare(1),)),
    }
    request = BackendRequest(**{**request.__dict__, "placements": placements})
    book = NodeBook({"gpu1": SSHNode("gpu1", "10.0.0.1"), "gpu2": SSHNode("gpu2", "10.0.0.2")})
    plan = SSHBackend(python=PY, book=book).plan(request)
    assert plan.spec.hosts == [Host("gpu1", "10.0.0.1", 2), Host("gpu2", "10.0.0.2", 1)]
    assert {p.name: p.ranks for p in plan.pods} == {
        "sp-launcher": (-1,), "sp-worker-0": (0,), "sp-worker-1": (2,), "sp-worker-2": (1,)
    }  # fmt: skip
    env = plan.spec.rank_env
    assert (env["1"]["CUDA_VISIBLE_DEVICES"], env["1"]["RINGLEADER_POD"]) == ("1", "sp-worker-2")
    assert (env["2"]["NODE_NAME"], env["2"]["RUNAI_NUM_OF_GPUS"]) == ("gpu2", "1")
    assert env["-1"] == {
        "RINGLEADER_POD": "sp-launcher", "RINGLEADER_NODE": "gpu1",
        "RINGLEADER_NODE_KIND": "ssh", "NODE_NAME": "gpu1",
    }  # fmt: skip
    assert plan.spec.env["RUNAI_MPI_NUM_WORKERS"] == "3"
    argv = mpirun_argv(
        plan.spec, hostfile_path="/h", error_dir="/e", attempt=0, master_addr="10.0.0.1",
        master_port=1, ssh=SSHOptions(), as_root=False,
    )  # fmt: skip
    exported = dict(a.split("=", 1) for a in argv if a.startswith(f"{RANK_ENV}="))
    assert set(json.loads(exported[RANK_ENV])) == {"0", "1", "2"}  # not mpirun's own


def test_bash_in_the_launcher_of_a_users_workload_runs_mpirun_as_that_user(
    site: Site,
) -> None:
    """With a root server running workloads as their users: the launcher's hostfile and
    the prompt's rc file are the account's to read, and mpirun runs as the account."""
    import pwd

    from ringleader.server.accounts import mapped_name

    rc_files = set(Path(tempfile.gettempdir()).glob("ringleader-bash-*.rc"))
    kim = site.user("kim")
    sub = site.as_user(
        kim, "submit-mpi", "mpiint", "--processes", "2", "--interactive", "--",
        "sh", "-c", "sleep infinity",
    )  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    _pods_running(site.server, "mpiint", 3)
    uid = pwd.getpwnam(mapped_name("kim", f"{site.prefix}-{{user}}")).pw_uid
    # One write(2) per line: two ranks' print()s (text, then newline) can interleave.
    probe = (
        "import os; os.write(1, ('MPI %s %d\\n' % "
        "(os.environ['OMPI_COMM_WORLD_SIZE'], os.getuid())).encode())"
    )
    script = (
        f'mpirun -np "$RUNAI_MPI_NUM_WORKERS" --hostfile "$RINGLEADER_HOSTFILE" '
        f'/usr/bin/python3 -c "{probe}"\n'
    )
    env = {**site.server.env, "RINGLEADER_CLIENT_ID": kim[0], "RINGLEADER_CLIENT_SECRET": kim[1]}
    piped = subprocess.run(
        [sys.executable, "-m", "ringleader", "bash", "mpiint"],
        input=script, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.splitlines().count(f"MPI 2 {uid}") == 2, piped.stdout
    argv = [sys.executable, "-m", "ringleader", "bash", "mpiint"]
    with Terminal(argv, {**env, "TERM": "dumb"}) as shell:
        shell.expect(re.escape("(mpiint/launcher) "))
        shell.type("id -u; exit\n")
        shell.expect(f"{uid}")
        assert shell.wait(timeout=30) == 0, shell.transcript
    # Read, then gone (only this account's: other tests' sessions may run meanwhile).
    assert not {p for p in _rc_files_of(uid) if p not in rc_files}


def _rc_files_of(uid: int) -> list[Path]:
    """The prompt rc files ``ringleader bash`` left in the temporary directory for ``uid``."""
    found = []
    for path in Path(tempfile.gettempdir()).glob("ringleader-bash-*.rc"):
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_uid == uid:
                found.append(path)
    return found

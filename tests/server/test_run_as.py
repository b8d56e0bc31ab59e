"""Workloads never run as the server (issue 12): with a root server each runs as an
unprivileged OS account of its submitter, and the walk from a workload to the
server's credentials, database, other runs and other pods fails at every step.

A real ``ringleader server --run-as user`` with real OS accounts (made and removed
here; a missing ``useradd`` fails under CI=true).  The server's home is under a
world-enterable directory, so its own mode, not pytest's 0700 tmp, is what is tested.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.errors import InvalidSpec
from ringleader.server.accounts import (
    AccountError,
    Accounts,
    check_run_as,
    check_template,
    mapped_name,
)
from tests.fixtures.tenants import (
    Site,
    need_root_and_useradd,
    tenant_site,  # noqa: F401 (the fixture: site)
)
from tests.server.probes import ATTEMPTS, probe_result


# ----- unit: the mapping and the checks ---------------------------------------------------
def test_mapped_names_are_valid_posix_names_and_distinct_users_stay_distinct() -> None:
    assert mapped_name("alice", "rl-{user}") == "rl-alice"
    odd = mapped_name("Alice.Smith@example.com", "rl-{user}")
    assert re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", odd), odd
    assert odd != mapped_name("alice-smith-example-com", "rl-{user}")
    assert odd != mapped_name("alice.smith@example.com", "rl-{user}")
    long = mapped_name("x" * 200, "rl-{user}")
    assert len(long) <= 32 and long != mapped_name("x" * 199, "rl-{user}")
    with pytest.raises(InvalidSpec, match="--run-as-template"):
        check_template("rl-{name}")
    with pytest.raises(InvalidSpec, match="--run-as-template"):
        check_template("static")


def test_a_non_root_server_cannot_run_as_users_and_says_which_flag() -> None:
    with pytest.raises(InvalidSpec, match="--run-as"):
        check_run_as("user", "rl-{user}", euid=1000)
    check_run_as("server", "rl-{user}", euid=1000)  # today's behaviour: as the server
    with pytest.raises(InvalidSpec, match="--run-as"):
        check_run_as("nobody", "rl-{user}", euid=0)


def test_an_agent_reads_its_account_strictly() -> None:
    from ringleader.launch.rank_process import run_as_ids

    assert run_as_ids("") is None
    assert run_as_ids("1001:1002") == (1001, 1002)
    for bad in ("0:1001", "1001:0", "1001", "a:b", "-1:5"):
        with pytest.raises(SystemExit):
            run_as_ids(bad)


def test_the_plan_gives_ranks_their_account_and_a_directory_in_its_home() -> None:
    from ringleader.server.backends.base import RunAs
    from ringleader.server.backends.local import LocalBackend
    from tests.helpers.local_backend import make_request

    backend = LocalBackend(python="/usr/bin/python3", cgroups=None)
    request = make_request(
        "/srv/rl/runs/w1",
        workload_id="w1",
        command="python train.py",
        environmentVariables=[
            {"name": "HOME", "value": "/root"},
            {"name": "USER", "value": "root"},
        ],
    )
    as_server = backend.plan(request)  # --run-as server: as today
    assert as_server.launch_file().run_as is None
    assert as_server.spec.env["RINGLEADER_CHECKPOINT_DIR"] == "/srv/rl/runs/w1/checkpoints"
    alice = RunAs("rl-alice", 1501, 1502, "/home/rl-alice")
    plan = backend.plan(dataclasses.replace(request, run_as=alice))
    assert plan.launch_file().to_json()["run_as"] == {
        "name": "rl-alice",
        "uid": 1501,
        "gid": 1502,
        "home": "/home/rl-alice",
    }
    env = plan.spec.env
    assert (env["HOME"], env["USER"], env["LOGNAME"]) == ("/home/rl-alice", "rl-alice", "rl-alice")
    assert env["RINGLEADER_CHECKPOINT_DIR"] == "/home/rl-alice/ringleader/w1/checkpoints"
    assert plan.spec.cwd == "/home/rl-alice/ringleader/w1/work"


def _entry(name: str, uid: int, gid: int | None = None) -> pwd.struct_passwd:
    gid = uid if gid is None else gid
    return pwd.struct_passwd((name, "x", uid, gid, "", f"/home/{name}", "/bin/sh"))


def test_resolution_never_falls_back_to_root_or_a_system_account() -> None:
    table = {
        "root": _entry("root", 0),
        "daemon": _entry("daemon", 1),
        "rl-daemon": _entry("rl-daemon", 2),
        "alice": _entry("alice", 1500),
        "zero-gid": _entry("zero-gid", 1600, 0),
    }
    created: list[str] = []

    def create(name: str) -> None:
        created.append(name)
        table[name] = _entry(name, 2000 + len(created))

    accounts = Accounts("rl-{user}", lookup=table.__getitem__, create=create, first_uid=1000)
    with pytest.raises(AccountError, match="does not exist"):
        accounts.resolve("bob", "no-such-account")
    with pytest.raises(AccountError, match="uid or gid 0"):
        accounts.resolve("bob", "root")
    with pytest.raises(AccountError, match="uid or gid 0"):
        accounts.resolve("bob", "zero-gid")
    with pytest.raises(AccountError, match="system account"):
        accounts.resolve("daemon", None)  # the template's rl-daemon is a system account
    with pytest.raises(AccountError, match="no longer exists"):
        accounts.resolve(None, None)
    assert accounts.resolve("bob", "daemon").uid == 1  # an explicit osUser may be one
    assert accounts.resolve("bob", "alice").name == "alice"
    first = accounts.resolve("carol", None)
    again = accounts.resolve("carol", None)
    assert (first, created) == (again, ["rl-carol"])  # created once, then reused
    root_template = Accounts("{user}", lookup=table.__getitem__, create=create, first_uid=1000)
    with pytest.raises(AccountError, match=r"uid or gid 0|system account"):
        root_template.resolve("root", None)


ESCALATE = (
    r"""
import json, os, subprocess, sys
paths = json.loads(sys.argv[1])
out = {"uid": os.getuid(), "id": subprocess.run(["id", "-u"], capture_output=True,
       text=True).stdout.strip()}
"""
    + ATTEMPTS
    + r"""attempt("kill_server", lambda: os.kill(paths["server_pid"], 0))
def join_other():
    with open(paths["other_cgroup"], "w") as f:
        f.write(str(os.getpid()))
attempt("other_cgroup", join_other)
def checkpoint():
    d = os.environ["RINGLEADER_CHECKPOINT_DIR"]
    with open(os.path.join(d, "probe"), "w") as f:
        f.write("x")
attempt("checkpoint", checkpoint)
out.update(home=os.environ.get("HOME"), user=os.environ.get("USER"),
           logname=os.environ.get("LOGNAME"), cwd=os.getcwd(),
           checkpoint_dir=os.environ.get("RINGLEADER_CHECKPOINT_DIR"))
print("RESULT " + json.dumps(out), flush=True)
"""
)


def test_the_escalation_walk_fails_at_every_step(site: Site) -> None:
    """Frank (an explicit osUser) keeps a pod up; eve (mapped account) tries to reach
    the server's secrets, its database, frank's run, log and pod cgroup, the server."""
    frank_account = site.account()
    frank = site.user("frank", frank_account)
    frank_id = site.submit(
        frank, "franks", "python", "-c", "print('frank-was-here')", interactive=True
    )
    site.wait_logs("franks", "frank-was-here")
    from ringleader.server.backends.local import LocalBackend

    hierarchy = LocalBackend().cgroups
    other_cgroup = (
        hierarchy.procs_files(f"rl-{frank_id}/franks-master-0")[0] if hierarchy else "/nonexistent"
    )
    home = site.server.home
    run_logs = sorted((home / "runs" / frank_id / "logs").rglob("rank-0.stdout"))
    assert run_logs
    paths = {
        "credentials": str(home / "credentials.json"),
        "database": str(home / "ringleader.db"),
        "home": str(home),
        "other_run": str(home / "runs" / frank_id),
        "other_log": str(run_logs[0]),
        "server_pid": site.server.proc.pid if site.server.proc else 1,
        "other_cgroup": other_cgroup,
    }
    eve = site.user("eve")
    script = site.script("escalate.py", ESCALATE)
    # What a spec sets cannot choose the identity ranks see (RINGLEADER_*, the account
    # included, it cannot set at all: reserved).
    claims = ("HOME=/root", "USER=root", "LOGNAME=root")
    site.submit(eve, "walk", "python", script, json.dumps(paths), env=claims)
    result = probe_result(site.wait_logs("walk", "RESULT"))
    print("escalation walk:", json.dumps(result, indent=1))
    eve_account = pwd.getpwnam(mapped_name("eve", f"{site.prefix}-{{user}}"))
    assert result["uid"] == eve_account.pw_uid != 0
    assert result["id"] == str(eve_account.pw_uid)
    for step in ("credentials", "database", "home_listing", "other_run", "other_log"):
        assert result[step] == "PermissionError", (step, result)
    assert result["kill_server"] == "PermissionError", result
    if hierarchy is not None:
        assert result["other_cgroup"] == "PermissionError", result
    # (c) its own identity and a checkpoint directory it can write
    assert (result["home"], result["user"], result["logname"]) == (
        eve_account.pw_dir,
        eve_account.pw_name,
        eve_account.pw_name,
    )
    assert result["checkpoint"] == "ok", result
    assert str(result["checkpoint_dir"]).startswith(f"{eve_account.pw_dir}/ringleader/")
    probe = Path(str(result["checkpoint_dir"])) / "probe"
    assert probe.stat().st_uid == eve_account.pw_uid
    # The server's own files stay the server's.
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    # (b) frank's pod runs as his osUser; (f) exec into it runs as that account too.
    frank_uid = pwd.getpwnam(frank_account).pw_uid
    ids = site.as_user(frank, "exec", "franks", "--", "sh", "-c", 'id -u; echo "$HOME $USER"')
    assert ids.returncode == 0, ids.stderr
    uid, who = ids.stdout.splitlines()[:2]
    assert int(uid) == frank_uid
    assert who == f"{pwd.getpwnam(frank_account).pw_dir} {frank_account}"
    if hierarchy is not None:  # frank's exec joined frank's pod, as frank
        joined = site.as_user(frank, "exec", "franks", "--", "cat", "/proc/self/cgroup")
        assert f"rl-{frank_id}/franks-master-0" in joined.stdout, joined.stdout


def test_a_mapped_account_is_created_once_and_reused(site: Site) -> None:
    gail = site.user("gail")
    name = mapped_name("gail", f"{site.prefix}-{{user}}")
    script = site.script("whoami.py", "import os\nprint('UID', os.getuid(), flush=True)\n")
    site.submit(gail, "first", "python", script)
    first = site.wait_logs("first", "UID ")
    made = pwd.getpwnam(name)
    assert f"UID {made.pw_uid}" in first
    assert stat.S_IMODE(os.stat(made.pw_dir).st_mode) == 0o700  # its home is its own
    site.submit(gail, "second", "python", script)
    assert f"UID {made.pw_uid}" in site.wait_logs("second", "UID ")
    assert pwd.getpwnam(name).pw_uid == made.pw_uid  # the same account, not a new one


def test_an_os_user_that_does_not_exist_fails_the_workload_and_nothing_runs(site: Site) -> None:
    ghost = site.user("henry", f"{site.prefix}-nosuch")
    drop = site.base / "drop"
    drop.mkdir(mode=0o1777, exist_ok=True)
    drop.chmod(0o1777)  # anyone's command could leave a mark here
    marker = drop / "henry-ran"
    site.submit(ghost, "ghost", "sh", "-c", f"touch {marker}")
    described = site.wait_phase("ghost", "Failed")
    assert f"{site.prefix}-nosuch" in described and "does not exist" in described, described
    assert not marker.exists()


def test_a_server_whose_workload_python_users_cannot_run_refuses_to_start(
    tmp_path: Path,
) -> None:
    need_root_and_useradd()
    if _runnable_by_nobody(sys.executable):
        pytest.skip("this interpreter is runnable by other users here")
    started = subprocess.run(
        [sys.executable, "-m", "ringleader", "server", "--run-as", "user"],
        env={**os.environ, "RINGLEADER_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 2, started.stderr
    assert "--workload-python" in started.stderr, started.stderr


def _runnable_by_nobody(python: str) -> bool:
    nobody = pwd.getpwnam("nobody")
    try:
        done = subprocess.run(
            [python, "-c", "pass"], user=nobody.pw_uid, group=nobody.pw_gid, cwd="/", check=False
        )
    except OSError:
        return False
    return done.returncode == 0


def test_an_mpi_workloads_ranks_run_as_its_account(site: Site) -> None:
    ivan = site.user("ivan")
    script = site.script("mpi_id.py", "import os\nprint('MPIUID', os.getuid(), flush=True)\n")
    sub = site.as_user(
        ivan, "submit-dist", "mpi", "mpiwho", "--workers", "2", "--", "python", script
    )
    assert sub.returncode == 0, sub.stderr
    site.wait_phase("mpiwho", "Completed")
    uid = pwd.getpwnam(mapped_name("ivan", f"{site.prefix}-{{user}}")).pw_uid
    assert site.server.cli("logs", "mpiwho").stdout.count(f"MPIUID {uid}") == 2


def test_a_working_directory_the_account_cannot_enter_fails_the_workload(site: Site) -> None:
    judy = site.user("judy")
    sub = site.as_user(
        judy, "submit-dist", "pytorch", "rootcwd", "--workers", "1", "--", "true", cwd="/root"
    )
    assert sub.returncode == 0, sub.stderr
    described = site.wait_phase("rootcwd", "Failed")
    assert "/root cannot be entered" in described and "spec.workingDir" in described, described

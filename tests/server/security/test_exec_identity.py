"""A pod's process is found by kernel facts, and exec goes only to whom it should (issue 22,
findings 2 and 3).

Finding 2: ``exec`` picked its target by environment (the oldest process saying
``RINGLEADER_JOB_ID=<id>`` and ``RANK=<n>``), so a tenant planted such a process
and the victim's ``exec`` ran in it, with the tenant's ``PATH``, as the victim.
Finding 3: anyone in a project could exec into a peer's workload, as the peer and
with the peer's token.  The attacks are performed by real OS accounts against a
real root server (the ``site`` fixture); the pieces have unit tests here too.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.launch.account import pod_process
from ringleader.launch.procs import start_ticks
from ringleader.launch.spawned import AGENT_RANK, is_spawned, record, recorded
from ringleader.server.backends.base import ExecTarget, RunAs
from ringleader.server.exec_session import STATUS
from ringleader.server.services.exec import CREDENTIAL_VARS, ENV, account_of, without_credentials
from tests.conftest import wait_until
from tests.fixtures.tenants import Site, tenant_site  # noqa: F401 (the fixture: site)
from tests.server.conftest import API, SQLITE_ONLY


# ----- unit: the spawn record ---------------------------------------------------------------
def _sleeper(env: dict[str, str] | None = None, **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "300"], env=env, **kwargs)  # type: ignore[call-overload]


def test_a_recorded_spawn_is_trusted_only_while_the_same_process_lives(tmp_path: Path) -> None:
    path = str(tmp_path / "spawned")
    first, second = _sleeper(), _sleeper()
    try:
        record(path, 0, first.pid)
        record(path, 1, second.pid)
        record(path, 0, second.pid)  # a restart: the later line wins
        found = recorded(path)
        assert set(found) == {0, 1} and found[0][0] == second.pid
        assert is_spawned(*found[0])
        assert not is_spawned(second.pid, found[0][1] - 1)  # another start: a reused pid
    finally:
        for proc in (first, second):
            proc.kill()
            proc.wait()
    assert not is_spawned(*found[0])  # gone (and reaped): nothing answers for it


def test_the_record_is_read_bounded_never_through_a_link_or_a_fifo(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.write_text("0 4242 17\nnot a line\n1 x 3\n-1 99 5\n0 0 1\n")
    assert recorded(str(real)) == {0: (4242, 17), -1: (99, 5)}
    (tmp_path / "link").symlink_to(real)
    assert recorded(str(tmp_path / "link")) == {}
    os.mkfifo(tmp_path / "fifo")
    assert recorded(str(tmp_path / "fifo")) == {}  # returns at once: O_NONBLOCK
    assert recorded(str(tmp_path / "missing")) == {}
    record(str(tmp_path / "link"), 0, os.getpid())  # not written through a link either
    assert real.read_text().count("\n") == 5


# ----- unit: which process is the pod's ---------------------------------------------------
def test_a_forged_older_process_is_never_the_pods(tmp_path: Path) -> None:
    """The finding's attack in miniature: an older process whose environment names the
    job and rank loses to the recorded one, and to a cgroup member, and one of another
    account is never taken."""
    forged_env = {**os.environ, "RINGLEADER_JOB_ID": "rl-victim", "RANK": "0"}
    forged = _sleeper(forged_env)
    real = _sleeper({**forged_env, "REAL": "1"})
    try:
        for proc in (forged, real):  # exec'd: its environment is its own
            wait_until(lambda p=proc: _argv0(p.pid) == b"sleep", 10, "sleep to start")
        path = str(tmp_path / "spawned")
        record(path, 0, real.pid)
        uid = os.geteuid()
        entry = recorded(path)[0]
        found = pod_process(0, uid=uid, spawns={0: entry})
        assert found is not None and found[0] == real.pid and found[1]["REAL"] == "1"
        # No record (a rank mpirun started): the pod's cgroup decides, not age or env.
        found = pod_process(0, uid=uid, members={real.pid})
        assert found is not None and found[0] == real.pid
        # A recorded pid outside the pod's cgroup is not the pod's.
        assert pod_process(0, uid=uid, spawns={0: entry}, members=set()) is None
        # Not the pod's account: not the pod's process, whatever it says.
        assert pod_process(0, uid=uid + 4242, spawns={0: entry}) is None
        # No cgroup and no record: nothing is the pod's, the forged marker least of all.
        assert pod_process(0, uid=uid) is None
    finally:
        for proc in (forged, real):
            proc.kill()
            proc.wait()


def test_without_a_cgroup_the_pod_is_what_lies_below_the_recorded_agent() -> None:
    """Where there is no cgroup (``--run-as account:NAME`` through sudo) the record
    holds the agent the supervisor started: the rank is the account's process below
    it.  A process of the same account forging the job's marker and rank, but not
    below the agent, is never taken; nor one below it of another account."""
    if os.geteuid() != 0:
        pytest.skip("needs root to start processes as nobody")
    nobody = pwd.getpwnam("nobody")
    env = {"PATH": "/usr/bin:/bin", "RINGLEADER_JOB_ID": "rl-no-cgroup", "RANK": "0"}
    as_nobody = {"user": nobody.pw_uid, "group": nobody.pw_gid, "cwd": "/"}
    forged = _sleeper(env, **as_nobody)  # older, same account, same marker
    starts_rank = "RINGLEADER_JOB_ID=rl-no-cgroup RANK=0 sleep 300 & wait"
    agent = subprocess.Popen(["sh", "-c", starts_rank], env={"PATH": "/usr/bin:/bin"}, **as_nobody)
    try:
        wait_until(lambda: _argv0(forged.pid) == b"sleep", 10, "the forger")
        rank = wait_until(lambda: _children(agent.pid), 10, "the agent's rank")[0]
        wait_until(lambda: _argv0(rank) == b"sleep", 10, "the rank to start")
        ticks = start_ticks(agent.pid)
        assert ticks is not None
        spawns = {AGENT_RANK: (agent.pid, ticks)}
        found = pod_process(0, uid=nobody.pw_uid, spawns=spawns)
        assert found is not None and found[0] == rank  # below the agent: the rank
        assert pod_process(0, uid=os.geteuid(), spawns=spawns) is None  # not root's
        assert pod_process(0, uid=nobody.pw_uid) is None  # no record: the forger is not it
        gone = {AGENT_RANK: (agent.pid, ticks - 1)}  # a reused pid: not the agent
        assert pod_process(0, uid=nobody.pw_uid, spawns=gone) is None
    finally:
        for proc in (forged, agent):
            proc.kill()
            proc.wait()


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _argv0(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return b""


# ----- unit: a session by someone else ---------------------------------------------------
def test_a_session_by_another_carries_no_credentials_here_or_beyond_a_prefix() -> None:
    env = {name: "secret" for name in CREDENTIAL_VARS} | {"RANK": "0", "PATH": "/usr/bin"}
    local = without_credentials(ExecTarget(node="n", cwd="/", env=env))
    assert local.env == {"RANK": "0", "PATH": "/usr/bin"} and local.prefix == ()
    sudo = ("/usr/bin/sudo", "-n", "-u", "rl-work", "--", "python3", "-I", "-m", "x", "--")
    beyond = without_credentials(ExecTarget(node="n", cwd="/", env={}, prefix=sudo))
    unset = beyond.prefix[len(sudo) :]
    assert unset[0] == ENV and unset[-1] == "--"
    assert [unset[i + 1] for i in range(1, len(unset) - 1, 2)] == list(CREDENTIAL_VARS)
    assert account_of(beyond) == "rl-work"
    assert account_of(ExecTarget("n", "/", {}, run_as=RunAs("rl-a", 5, 5, "/h"))) == "rl-a"
    # Into a container: the variables are unset inside it, on a terminal or not.
    podman = ("/usr/bin/podman", "exec", "--interactive", "--user", "65534:65534")
    boxed = without_credentials(
        ExecTarget("n", "/", {}, prefix=(*podman, "c"), tty_prefix=(*podman, "--tty", "c"),
                   marked=("RINGLEADER_EXEC_SESSION=x", 1))
    )  # fmt: skip
    blank = [arg for name in CREDENTIAL_VARS for arg in ("--env", f"{name}=")]
    assert list(boxed.prefix) == [*podman, *blank, "c"]  # no /usr/bin/env in the image needed
    assert boxed.tty_prefix is not None and list(boxed.tty_prefix) == [
        *podman,
        "--tty",
        *blank,
        "c",
    ]
    assert account_of(boxed) == "nobody"


# ----- real tenants -------------------------------------------------------------------------
#: Eve's fake ``id``: run as whoever reaches it, it tells (and steals what it can).
EVIL_ID = """#!/bin/sh
{{ echo "ran as $(/usr/bin/id -u)"; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' \\
  | grep '^RINGLEADER_TOKEN='; }} > {drop}/evil-ran 2>/dev/null
exec /usr/bin/id "$@"
"""
#: Eve's workload: her fake ``id`` in a directory anyone reads, and a process whose
#: environment says it is rank 0 of frank's job, with that directory first on PATH.
PLANT = """import os, subprocess, sys
drop, job = sys.argv[1], sys.argv[2]
evil = os.path.join(drop, "evil")
os.makedirs(evil, exist_ok=True)
os.chmod(evil, 0o755)
with open(os.path.join(evil, "id"), "w") as f:
    f.write(sys.argv[3])
os.chmod(os.path.join(evil, "id"), 0o755)
env = dict(os.environ, RINGLEADER_JOB_ID=job, RANK="0", PATH=evil + ":/usr/bin:/bin")
subprocess.Popen(["sleep", "100000"], env=env, start_new_session=True)
print("PLANTED", flush=True)
"""


def _drop(site: Site) -> Path:
    """A directory any account may write, as /tmp is: where eve's traps would report."""
    drop = site.base / "drop"
    drop.mkdir(mode=0o1777, exist_ok=True)
    drop.chmod(0o1777)
    return drop


def _token_of(site: Site, creds: tuple[str, str], name: str) -> str:
    """The workload's pod token, as its submitter's own session sees it."""
    out = site.as_user(creds, "exec", name, "--", "sh", "-c", 'echo "TOKEN=$RINGLEADER_TOKEN"')
    found = re.search(r"TOKEN=(\S+)", out.stdout)
    assert out.returncode == 0 and found, (out.stdout, out.stderr)
    return found.group(1)


def test_a_planted_process_forging_the_job_never_gets_the_victims_exec(site: Site) -> None:
    """Finding 2: eve plants, before frank's pod starts, a process saying it is rank 0
    of frank's job, with her ``id`` first on its PATH; frank's exec runs in his own pod,
    as him, and eve's trap never runs nor sees his token."""
    drop = _drop(site)
    frank_account = site.account()
    frank = site.user("frank2", frank_account)
    frank_id = site.submit(frank, "victim", "python", "-c", "print('up')", interactive=True)
    site.wait_logs("victim", "up")
    suspended = site.as_user(frank, "suspend", "victim")
    assert suspended.returncode == 0, suspended.stderr
    site.wait_phase("victim", "Stopped")
    eve = site.user("eve2")
    plant = site.script("plant.py", PLANT)
    evil_id = EVIL_ID.format(drop=drop)
    site.submit(
        eve, "trap", "python", plant, str(drop), f"rl-{frank_id}", evil_id, interactive=True
    )
    site.wait_logs("trap", "PLANTED")
    resumed = site.as_user(frank, "resume", "victim")  # frank's pod now starts after eve's
    assert resumed.returncode == 0, resumed.stderr
    site.wait_phase("victim", "Running")
    wait_until(lambda: site.server.cli("logs", "victim").stdout.count("up") >= 2, 120, "rerun")

    ran = site.as_user(frank, "exec", "victim", "--", "sh", "-c", "id -u; cat /proc/self/cgroup")
    assert ran.returncode == 0, ran.stderr
    frank_uid = pwd.getpwnam(frank_account).pw_uid
    assert ran.stdout.splitlines()[0] == str(frank_uid)
    from ringleader.server.backends.local import LocalBackend

    if LocalBackend().cgroups is not None:
        assert f"rl-{frank_id}/victim-master-0" in ran.stdout, ran.stdout
    assert not (drop / "evil-ran").exists()  # eve's id never ran, as anyone
    token = _token_of(site, frank, "victim")
    for path in drop.rglob("*"):  # nothing eve can read holds frank's token
        if path.is_file():
            assert token not in path.read_text(errors="replace"), path


def test_a_researcher_cannot_exec_into_a_peers_workload(site: Site) -> None:
    """Finding 3: a researcher of the project tries exec and bash into a global admin's
    workload (whose pod holds an admin's token): refused, and nothing runs."""
    drop = _drop(site)
    made = site.server.cli(  # the global admin's own workload
        "submit-dist", "pytorch", "adminpod", "--workers", "1", "--interactive",
        "--", "python", "-c", "print('admin-up')", cwd=str(site.scripts),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    site.wait_logs("adminpod", "admin-up")
    mallory = site.user("mallory")
    marker = drop / "mallory-ran"
    tried = site.as_user(mallory, "exec", "adminpod", "--", "touch", str(marker))
    assert tried.returncode != 0 and "submitter" in tried.stderr, tried.stderr
    shell = subprocess.run(
        [sys.executable, "-m", "ringleader", "bash", "adminpod"],
        input=f"touch {marker}\n",
        env=_env_of(site, mallory),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shell.returncode != 0 and "submitter" in shell.stderr, shell.stderr
    assert not marker.exists()
    described = site.server.cli("describe", "adminpod").stdout
    assert "mallory" not in described  # no session was opened, so none is recorded


def _env_of(site: Site, creds: tuple[str, str]) -> dict[str, str]:
    """The CLI's environment as ``creds`` (what ``Site.as_user`` runs with)."""
    env = dict(site.server.env)
    env["RINGLEADER_CLIENT_ID"], env["RINGLEADER_CLIENT_SECRET"] = creds
    return env


def test_a_project_admin_or_global_admin_execs_without_the_pod_token_and_it_is_recorded(
    site: Site,
) -> None:
    """Admins may exec into a member's workload: as its account, with no pod token, and
    the workload's events say who did, as whom."""
    rita_account = site.account()
    rita = site.user("rita", rita_account)
    site.submit(rita, "ritas", "python", "-c", "print('rita-up')", interactive=True)
    site.wait_logs("ritas", "rita-up")
    show = 'id -u; for v in RINGLEADER_TOKEN RINGLEADER_CLIENT_SECRET; do eval "echo $v=\\${$v-none}"; done'
    own = site.as_user(rita, "exec", "ritas", "--", "sh", "-c", show)
    assert own.returncode == 0 and "RINGLEADER_TOKEN=none" not in own.stdout, own.stdout
    paula = site.user("paula")
    assigned = site.server.cli("user", "assign", "paula", "default", "--role", "admin")
    assert assigned.returncode == 0, assigned.stderr
    rita_uid = str(pwd.getpwnam(rita_account).pw_uid)
    for who, run in (
        ("paula", lambda *a: site.as_user(paula, *a)),
        ("admin", lambda *a: site.server.cli(*a)),
    ):
        done = run("exec", "ritas", "--", "sh", "-c", show)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == rita_uid, (who, done.stdout)
        assert "RINGLEADER_TOKEN=none" in lines and "RINGLEADER_CLIENT_SECRET=none" in lines
        described = site.server.cli("describe", "ritas").stdout
        assert f"exec by {who} as {rita_account}" in described, described


#: Frank's rank leaves a directory it stands in, and puts a link where /proc says its
#: directory is ("... (deleted)") to a place only root can pass: whoever enters the
#: pod's directory with root's rights lands behind the locked one.
CWD_TRAP = """import os, sys, time
here = os.path.join(os.environ["HOME"], "trap", os.environ["RANK"])
os.makedirs(here, exist_ok=True)
os.chdir(here)
os.rmdir(here)
os.symlink(sys.argv[1], here + " (deleted)")
print("TRAPPED", os.readlink("/proc/self/cwd"), flush=True)
time.sleep(100000)
"""


def test_the_sessions_directory_is_entered_as_the_account_not_as_root(site: Site) -> None:
    """The session's directory is the pod's process's, a path its tenant controls: it is
    entered with the account's rights, so a link there leads nowhere root alone may go."""
    locked = site.base / "locked"
    inner = locked / "inner"
    inner.mkdir(parents=True)
    locked.chmod(0o700)  # root's alone; inner and its file would be anyone's
    inner.chmod(0o755)
    (inner / "secret.txt").write_text("root-only-secret\n")
    (inner / "secret.txt").chmod(0o644)
    trap = site.script("cwd_trap.py", CWD_TRAP)
    oscar_account = site.account()
    oscar = site.user("oscar", oscar_account)
    site.submit(oscar, "cwdtrap", "python", trap, str(inner))
    site.wait_logs("cwdtrap", "TRAPPED")
    done = site.as_user(oscar, "exec", "cwdtrap", "--", "sh", "-c", "pwd; cat secret.txt")
    assert "root-only-secret" not in done.stdout, done.stdout
    assert done.stdout, done.stderr
    assert done.stdout.splitlines()[0] == pwd.getpwnam(oscar_account).pw_dir, done.stdout


# ----- the API's answers (in-process server, as the server's own account) -------------------
def _exec_status(api: API, wid: str, headers: dict[str, str]) -> dict[str, object]:
    path = f"/api/v1/workloads/{wid}/exec?command=true"
    with api.client.websocket_connect(path, headers=headers) as ws:
        data = ws.receive_bytes()
        while data[0] != STATUS:  # the command's output, if any, before its status
            data = ws.receive_bytes()
    return json.loads(data[1:])


@SQLITE_ONLY
def test_who_may_exec_answers_404_403_or_a_session_and_records_others(api: API) -> None:
    """Outside the project: 404; a researcher into another's workload: 403 naming who may;
    a project admin: a session, recorded on the workload."""
    outsider, researcher, lead = (api.new_user(n) for n in ("oli", "rae", "lea"))
    for name, role in (("rae", "researcher"), ("lea", "admin")):
        put = api.put(f"/api/v1/org-unit/projects/default/members/{name}", json={"role": role})
        assert put.status_code == 200, put.text
    wid = api.submit("held", "sleep 300").json()["workloadId"]
    api.wait_phase(wid, {"Running"})
    assert _exec_status(api, wid, outsider)["code"] == 404
    refused = _exec_status(api, wid, researcher)
    assert refused["code"] == 403 and "submitter" in str(refused["error"]), refused
    assert _exec_status(api, wid, lead) == {"exitCode": 0}
    events = api.get(f"/api/v1/workloads/{wid}/events").text
    assert "exec by lea as " in events and "exec by rae" not in events, events

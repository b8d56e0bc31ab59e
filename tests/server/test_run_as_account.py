"""A non-root server keeps workloads from its files (``--run-as account:NAME``).

Real parts only: the server runs as a non-root OS account made here, every workload
as a second one, through a real ``sudo`` and a sudoers rule this module writes into
/etc/sudoers.d/ (both accounts and the rule are removed after).  The interpreter is
a virtual environment of Debian's /usr/bin/python3 that imports ringleader by
itself (sudo passes no PYTHONPATH; pyenv's python under /root is unusable by other
accounts).  A missing root, useradd, sudo or /usr/bin/python3 fails under CI=true.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.errors import InvalidSpec
from ringleader.launch import account as entry
from ringleader.server.accounts import account_name, check_run_as
from tests.conftest import require, wait_until
from tests.fixtures.tenants import wait_logs
from tests.fixtures.terminal import Terminal
from tests.server.conftest import ServerProcess, stop_workloads
from tests.server.probes import ATTEMPTS, probe_result

SRC = Path(__file__).resolve().parents[2] / "src"
DEBIAN_PYTHON = "/usr/bin/python3"


# ----- unit: the flag and the entry point's refusals ------------------------------------
def test_the_flag_takes_account_name_and_refuses_what_is_not_one() -> None:
    assert account_name("account:rl-work") == "rl-work"
    assert account_name("user") is None and account_name("server") is None
    check_run_as("account:rl-work", "rl-{user}", euid=1000)  # no root needed
    for bad in ("account:", "account:Root!", "account:" + "x" * 40, "acct:x"):
        with pytest.raises(InvalidSpec, match="--run-as"):
            check_run_as(bad, "rl-{user}", euid=1000)
    with pytest.raises(InvalidSpec, match="account:NAME"):  # the non-root way is named
        check_run_as("user", "rl-{user}", euid=1000)


def test_the_rule_names_one_account_one_interpreter_and_one_module() -> None:
    rule = entry.sudo_rule("rl-server", "rl-work", "/opt/rl/bin/python3")
    assert rule == (
        "rl-server ALL=(rl-work) NOPASSWD: /opt/rl/bin/python3 -I -m ringleader.launch.account *"
    )
    assert "SETENV" not in rule  # no variable may be passed through it
    argv = entry.sudo_argv("/usr/bin/sudo", "rl-work", "/opt/rl/bin/python3", "check")
    assert argv[:5] == ["/usr/bin/sudo", "-n", "-u", "rl-work", "--"]


def test_the_entry_point_refuses_root_and_bad_usage(capsys) -> None:
    assert entry.main(["nope"]) == 2 and entry.main([]) == 2
    if os.geteuid() == 0:  # the rule names an unprivileged account: root is a mistake
        assert entry.main(["check"]) == 2
        assert "refusing to run as root" in capsys.readouterr().err
    bad = {
        "exec": (["rl-x"], ["rl-x", "0", "true"], ["rl-x", "zero", "--", "true"],
                 ["--check", "rl-x", "0", "--", "true"]),
        "sweep": (["rl-x"], ["rl-x", "soon"]),
        "agent": ([], ["--job-id"], ["--other", "x"]),
        "prepare": (["/tmp/x"],),
    }  # fmt: skip
    for verb, cases in bad.items():
        for args in cases:
            assert entry.VERBS[verb](list(args)) == 2, (verb, args)


# ----- a real non-root server, a real workload account, real sudo -----------------------
def _need_the_parts() -> None:
    require(os.geteuid() == 0, "root (to make the test accounts and the sudoers rule)")
    for tool in ("useradd", "userdel", "sudo", "visudo"):
        require(shutil.which(tool) is not None, f"{tool} (apt: passwd, sudo)")
    require(os.access(DEBIAN_PYTHON, os.X_OK), DEBIAN_PYTHON)


def _useradd(name: str, *, home: bool) -> pwd.struct_passwd:
    flags = ["--create-home", "--shell", "/bin/sh"] if home else ["--no-create-home"]
    subprocess.run(["useradd", "--user-group", *flags, name], check=True)
    return pwd.getpwnam(name)


def _workload_venv(base: Path) -> str:
    """A venv of Debian's python that imports ringleader and its dependencies by itself
    (a .pth naming our sources and this venv's packages, as an editable install does)."""
    venv = base / "venv"
    subprocess.run([DEBIAN_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = sysconfig.get_paths()["purelib"]
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "ringleader-test.pth").write_text(f"{SRC}\n{purelib}\n")
    return str(venv / "bin" / "python3")


class AccountSite:
    """The server account, the workload account, the rule, and a server as the first."""

    def __init__(self, base: Path) -> None:
        tag = uuid.uuid4().hex[:5]
        self.base = base
        self.server_account = _useradd(f"rls{tag}", home=False)
        self.workload_account = _useradd(f"rlw{tag}", home=True)
        self.python = _workload_venv(base)
        self.rule_file = Path(f"/etc/sudoers.d/ringleader-test-{tag}")
        self.write_rule(
            entry.sudo_rule(self.server_account.pw_name, self.workload_account.pw_name, self.python)
        )
        self.secret = secrets.token_hex(8)  # in the server's environment: no pod may see it
        self.server = self.make_server(base / "home")
        self.scripts = base / "scripts"
        self.scripts.mkdir(mode=0o755)

    def write_rule(self, text: str, path: Path | None = None) -> None:
        path = path or self.rule_file
        path.write_text(text + "\n")
        path.chmod(0o440)
        checked = subprocess.run(["visudo", "-cf", str(path)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr

    def make_server(self, home: Path, *args: str, python: str = "") -> ServerProcess:
        home.mkdir(mode=0o700)
        os.chown(home, self.server_account.pw_uid, self.server_account.pw_gid)
        run_as = f"account:{self.workload_account.pw_name}"
        workload_python = ("--workload-python", python or self.python)
        server = ServerProcess(home, "--run-as", run_as, *workload_python, *args)
        server.python = self.python
        server.account = (self.server_account.pw_uid, self.server_account.pw_gid)
        server.env["CLOUD_TOKEN"] = self.secret
        return server

    def start_server(
        self, home: Path, *args: str, env: dict[str, str] | None = None, python: str = ""
    ) -> subprocess.CompletedProcess[str]:
        """A second server's start as the server account, to completion (it must refuse)."""
        server = self.make_server(home, *args, python=python)
        return subprocess.run(
            [self.python, "-m", "ringleader", "server", "--port", str(server.port),
             *server.server_args],
            env={**server.env, **(env or {})},
            user=self.server_account.pw_uid,
            group=self.server_account.pw_gid,
            extra_groups=[],
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip

    def script(self, name: str, text: str) -> str:
        path = self.scripts / name
        path.write_text(text)
        path.chmod(0o644)
        return str(path)

    def submit(self, name: str, *command: str, interactive: bool = False) -> str:
        flags = ["--interactive"] if interactive else []
        sub = self.server.cli(
            "submit-dist", "pytorch", name, "--workers", "1", *flags, "--", *command,
            cwd=str(self.scripts),
        )  # fmt: skip
        assert sub.returncode == 0, sub.stderr
        described = self.server.cli("describe", name).stdout
        found = re.search(r"Id:\s+(\S+)", described)
        assert found, described
        return found.group(1)

    def wait_logs(self, name: str, word: str, timeout: float = 120) -> str:
        return wait_logs(self.server, name, word, timeout)

    def cleanup(self) -> None:
        self.server.kill()
        stop_workloads(self.server.home)
        for path in Path("/etc/sudoers.d").glob(self.rule_file.name + "*"):
            path.unlink()
        for account in (self.workload_account, self.server_account):
            subprocess.run(["userdel", "-r", account.pw_name], capture_output=True, check=False)


@pytest.fixture(scope="module")
def site() -> Iterator[AccountSite]:
    _need_the_parts()
    base = Path(tempfile.mkdtemp(prefix="rl-run-as-account-", dir="/var/tmp"))
    base.chmod(0o755)  # enterable by all: the server's home must protect itself
    made = None
    try:
        made = AccountSite(base)
        made.server.start()
        yield made
    finally:
        if made is not None:
            made.cleanup()
        shutil.rmtree(base, ignore_errors=True)


WALK = (
    r"""
import json, os, sys
paths = json.loads(sys.argv[1])
out = {"uid": os.getuid(), "groups": os.getgroups()}
"""
    + ATTEMPTS
    + r"""attempt("signal_server", lambda: os.kill(paths["server_pid"], 0))
attempt("server_environ", lambda: open(f"/proc/{paths['server_pid']}/environ", "rb").read())
attempt("supervisor_environ",
        lambda: open(f"/proc/{paths['supervisor_pid']}/environ", "rb").read())
def checkpoint():
    with open(os.path.join(os.environ["RINGLEADER_CHECKPOINT_DIR"], "probe"), "w") as f:
        f.write("x")
attempt("checkpoint", checkpoint)
agent = os.getppid()  # the rank's parent: this host's agent, the account's own process
out["agent_environ"] = open(f"/proc/{agent}/environ", "rb").read().decode(errors="replace")
out["environ"] = dict(os.environ)
out["cwd"] = os.getcwd()
print("RESULT " + json.dumps(out), flush=True)
"""
)


def test_the_walk_from_a_workload_to_the_server_fails_at_every_step(site: AccountSite) -> None:
    other_id = site.submit("other", "python", "-c", "print('other-was-here')", interactive=True)
    site.wait_logs("other", "other-was-here")
    home = site.server.home
    other_run = home / "runs" / other_id
    state = json.loads((other_run / "state.json").read_text())
    (other_log,) = sorted(other_run.glob("logs/attempt-*/rank-0.stdout"))
    paths = {
        "credentials": str(home / "credentials.json"),
        "database": str(home / "ringleader.db"),
        "home": str(home),
        "other_run": str(other_run),
        "other_log": str(other_log),
        "server_pid": site.server.proc.pid if site.server.proc else 1,
        "supervisor_pid": state["pid"],
    }
    site.submit("walk", "python", site.script("walk.py", WALK), json.dumps(paths))
    result = probe_result(site.wait_logs("walk", "RESULT"))
    account = site.workload_account
    assert result["uid"] == account.pw_uid and result["groups"] == [account.pw_gid], result
    for step in ("credentials", "database", "home_listing", "other_run", "other_log"):
        assert result[step] == "PermissionError", (step, result)
    for step in ("signal_server", "server_environ", "supervisor_environ"):
        assert result[step] == "PermissionError", (step, result)
    # Its own HOME and identity, and a checkpoint directory of its own it can write.
    env = result["environ"]
    assert (env["HOME"], env["USER"], env["LOGNAME"]) == (account.pw_dir,) + (account.pw_name,) * 2
    assert result["checkpoint"] == "ok", result
    assert env["RINGLEADER_CHECKPOINT_DIR"].startswith(f"{account.pw_dir}/ringleader/")
    assert result["cwd"] == str(site.scripts)
    # None of the server's environment: not its secret, its home, nor sudo's own.
    for seen in (json.dumps(env), result["agent_environ"]):
        assert site.secret not in seen and "RINGLEADER_HOME" not in seen
        assert "SUDO_" not in seen and str(home) not in seen
    # The server's own files stay the server's.
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert home.stat().st_uid == site.server_account.pw_uid


def test_exec_runs_as_the_account_in_the_pods_directory(site: AccountSite) -> None:
    site.submit("shell", "python", "-c", "print('shell-up')", interactive=True)
    site.wait_logs("shell", "shell-up")
    account = site.workload_account
    ran = site.server.cli("exec", "shell", "--", "sh", "-c", 'id -u; echo "$HOME"; pwd')
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [str(account.pw_uid), account.pw_dir, str(site.scripts)]
    missing = site.server.cli("exec", "shell", "--", "no-such-command")
    assert missing.returncode == 127 and "command not found" in missing.stderr, missing
    site.submit("ended", "true")
    wait_until(
        lambda: "Status: Completed" in site.server.cli("describe", "ended").stdout, 120, "ended"
    )
    refused = site.server.cli("exec", "ended", "--", "true")
    assert refused.returncode != 0 and "no running process" in refused.stderr, refused


def test_bash_on_a_terminal_runs_as_the_account(site: AccountSite) -> None:
    site.submit("tty", "python", "-c", "print('tty-up')", interactive=True)
    site.wait_logs("tty", "tty-up")
    argv = [sys.executable, "-m", "ringleader", "bash", "tty"]
    with Terminal(argv, {**site.server.env, "TERM": "dumb"}) as shell:
        shell.expect(re.escape("$ "))  # the account's shell prompt (not root's #)
        shell.type("echo uid=$(id -u) on=$(tty)\n")
        shell.expect(f"uid={site.workload_account.pw_uid} on=/dev/pts/")
        shell.type("exit 3\n")
        assert shell.wait(timeout=30) == 3, shell.transcript


def _account_processes_with(arg: str, uid: int) -> list[int]:
    found = []
    for entry_ in Path("/proc").iterdir():
        try:
            argv = (entry_ / "cmdline").read_bytes().split(b"\0")
            owner = entry_.stat().st_uid
        except OSError:
            continue
        if arg.encode() in argv and owner == uid:
            found.append(int(entry_.name))
    return found


def test_delete_ends_the_workloads_processes_left_in_their_own_session(
    site: AccountSite,
) -> None:
    seconds = f"1000.{uuid.uuid4().int % 10**6:06d}"
    uid = site.workload_account.pw_uid
    site.submit("daemon", "sh", "-c", f"setsid sleep {seconds} & echo daemon-up; wait")
    site.wait_logs("daemon", "daemon-up")
    wait_until(lambda: len(_account_processes_with(seconds, uid)) == 2, 60, "2 daemons")
    assert site.server.cli("delete", "daemon").returncode == 0
    wait_until(lambda: not _account_processes_with(seconds, uid), 60, "no daemon left")


def test_the_server_refuses_to_start_without_the_rule_naming_the_flag(
    site: AccountSite,
) -> None:
    # An account the rule does not name: refused, with the exact rule to add.
    other = site.start_server(site.base / "home-nobody", "--run-as", "account:nobody")
    assert other.returncode == 2, other.stderr
    rule = entry.sudo_rule(site.server_account.pw_name, "nobody", site.python)
    assert "--run-as" in other.stderr and rule in other.stderr, other.stderr
    # No sudo on the server's PATH: refused, naming the flag and how to get it.
    no_sudo = site.start_server(site.base / "home-nosudo", env={"PATH": "/nonexistent"})
    assert no_sudo.returncode == 2 and "--run-as" in no_sudo.stderr, no_sudo.stderr
    assert "apt-get install sudo" in no_sudo.stderr, no_sudo.stderr
    # Its own account is no separate account.
    own = site.start_server(
        site.base / "home-own", "--run-as", f"account:{site.server_account.pw_name}"
    )
    assert own.returncode == 2 and "own account" in own.stderr, own.stderr
    assert not (site.base / "home-nobody" / "ringleader.db").exists()  # nothing half-made


def test_the_server_refuses_a_sudo_that_passes_its_environment(site: AccountSite) -> None:
    loose = site.rule_file.with_name(site.rule_file.name + "-loose")
    site.write_rule(f"Defaults:{site.server_account.pw_name} !env_reset", loose)
    try:
        started = site.start_server(site.base / "home-loose")
    finally:
        loose.unlink()
    assert started.returncode == 2, started.stderr
    assert "passes the server's environment" in started.stderr, started.stderr
    assert "env_reset" in started.stderr and "CLOUD_TOKEN" in started.stderr, started.stderr


def test_an_interpreter_that_needs_pythonpath_is_refused_naming_the_flag(
    site: AccountSite,
) -> None:
    """Debian's python with ringleader only on PYTHONPATH works for a root server, not
    through sudo, which passes no variable."""
    rule = site.rule_file.with_name(site.rule_file.name + "-debian")
    names = (site.server_account.pw_name, site.workload_account.pw_name)
    site.write_rule(entry.sudo_rule(*names, DEBIAN_PYTHON), rule)
    try:
        home = site.base / "home-debian"
        started = site.start_server(home, python=DEBIAN_PYTHON, env={"PYTHONPATH": str(SRC)})
    finally:
        rule.unlink()
    assert started.returncode == 2, started.stderr
    assert "--workload-python" in started.stderr and "PYTHONPATH" in started.stderr


def test_an_mpi_workloads_launcher_and_ranks_run_as_the_account(site: AccountSite) -> None:
    require(shutil.which("mpirun") is not None, "OpenMPI's mpirun (apt: openmpi-bin)")
    script = site.script("mpi_id.py", "import os\nprint('MPIUID', os.getuid(), flush=True)\n")
    sub = site.server.cli(
        "submit-dist", "mpi", "mpiwho", "--workers", "2", "--", "python", script,
        cwd=str(site.scripts),
    )  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    wait_until(
        lambda: "Status: Completed" in site.server.cli("describe", "mpiwho").stdout,
        120,
        "mpiwho Completed",
    )
    logs = site.server.cli("logs", "mpiwho").stdout
    assert logs.count(f"MPIUID {site.workload_account.pw_uid}") == 2, logs


def test_a_root_server_switches_to_the_account_itself(site: AccountSite) -> None:
    """No sudo needed as root: the same flag, the account reached as --run-as user's are."""
    account = site.workload_account
    home = site.base / "home-root"
    server = ServerProcess(
        home, "--run-as", f"account:{account.pw_name}", "--workload-python", site.python
    )
    server.start()
    try:
        script = site.script("rootwho.py", "import os\nprint('ROOTUID', os.getuid(), flush=True)\n")
        sub = server.cli("submit-dist", "pytorch", "rootwho", "--workers", "1", "--", "python",
                         script, cwd=str(site.scripts))  # fmt: skip
        assert sub.returncode == 0, sub.stderr
        wait_until(
            lambda: server.cli("logs", "rootwho").stdout.count(f"ROOTUID {account.pw_uid}") == 2,
            120,
            "both ranks as the account",
        )
        launch = json.loads(next((home / "runs").glob("*/launch.json")).read_text())
        assert launch["run_as"]["name"] == account.pw_name and "sudo" not in launch["run_as"]
    finally:
        server.kill()
        stop_workloads(home)

"""Which OS account a workload's code runs as: never the server's own.

Nomenclature:
- *run-as mode* (``ringleader server --run-as``): ``user`` (each workload
  runs as an unprivileged account of its submitter; the default when the
  server is root), ``account:NAME`` (every workload runs as the one existing
  account NAME: a non-root server's way to keep workloads from its files,
  through ``sudo -n -u NAME`` and a sudoers rule the admin writes, see
  ``sudo_rule``) or ``server`` (as the server's own user, with no isolation
  from the server's files);
- *explicit account*: a user's ``os_user`` (``ringleader user create NAME
  --os-user ACCOUNT``); it must exist, ringleader never creates it;
- *mapped account*: otherwise, ``--run-as-template`` (default ``rl-{user}``)
  applied to the ringleader user name, made a valid POSIX name, and created
  on first use (``useradd --create-home --shell /bin/sh --user-group``, no
  password) under a lock.

Invariants: ``account:NAME`` is checked when the server starts (it exists, is
neither root nor the server's account; without root, sudo lets the server run
``launch/account.py`` as it without a password, passes it none of the server's
variables, and it cannot read the server's data directory) and the server
refuses to start otherwise, naming ``--run-as``; an account is resolved when a
workload starts, from the user's record, never from its spec; resolution never
falls back to root: uid or gid 0 is refused, as is a mapped name that is an
existing system account (uid below ``UID_MIN``) — only an explicit ``os_user``
may name one; a name that had to be changed to be valid gets a hash of the
original, so two ringleader users never map to one account.  Commands are argv
lists; names are checked against ``POSIX_NAME`` before any command sees them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ringleader.errors import InvalidSpec, RingleaderError
from ringleader.launch.account import MODULE, sudo_argv, sudo_rule
from ringleader.server.backends.base import RunAs
from ringleader.server.workload_python import Probe, probe

if TYPE_CHECKING:
    from ringleader.server.config import ServerConfig

RUN_AS_USER = "user"
RUN_AS_SERVER = "server"
RUN_AS_ACCOUNT = "account"  # account:NAME
RUN_AS_MODES = (RUN_AS_USER, RUN_AS_SERVER)
DEFAULT_TEMPLATE = "rl-{user}"
POSIX_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
MAX_NAME = 32
DEFAULT_UID_MIN = 1000


class AccountError(RingleaderError):
    """No account a workload may run as: it fails with this reason, nothing runs."""


def account_name(mode: str) -> str | None:
    """NAME of the mode ``account:NAME``; None for another mode."""
    kind, sep, name = mode.partition(":")
    return name if kind == RUN_AS_ACCOUNT and sep else None


def check_run_as(mode: str, template: str, *, euid: int | None = None) -> None:
    """Refuse at start what cannot work, naming the flag (an account:NAME's account is
    checked by ``fixed_account``)."""
    name = account_name(mode)
    if mode not in RUN_AS_MODES and name is None:
        raise InvalidSpec(f"must be user, server or account:NAME, not {mode!r}", "--run-as")
    if name is not None and not POSIX_NAME.match(name):
        problem = f"{name!r} is not a POSIX user name" if name else "NAME is missing"
        raise InvalidSpec(f"account:NAME: {problem}", "--run-as")
    if mode == RUN_AS_USER and (os.geteuid() if euid is None else euid) != 0:
        raise InvalidSpec(
            "--run-as user needs a server running as root (only root can run workloads as "
            "other OS users); start it as root, or pass --run-as account:NAME (every "
            "workload runs as the OS account NAME, through sudo) or --run-as server (as the "
            "server's own user, which can read its files)",
            "--run-as",
        )
    check_template(template)


def check_template(template: str) -> None:
    """``{user}`` once and no other field; a sample result must be a valid name."""
    fields = re.findall(r"\{([^{}]*)\}", template)
    if fields != ["user"] or template.count("{") != 1 or template.count("}") != 1:
        raise InvalidSpec(
            f"--run-as-template must contain {{user}} once and no other field: {template!r}",
            "--run-as-template",
        )
    if not POSIX_NAME.match(mapped_name("alice", template)):
        raise InvalidSpec(
            f"--run-as-template {template!r} does not make a POSIX user name "
            "(lower-case letters, digits, _ and -, starting with a letter or _)",
            "--run-as-template",
        )


def mapped_name(username: str, template: str) -> str:
    """``template`` applied to ``username``, made a valid POSIX user name.

    Letters are lower-cased and anything else not allowed becomes ``-``; when
    that changed the name (or it had to be shortened), 8 hex digits of the
    original's SHA-256 are appended so distinct users stay distinct accounts.
    """
    wanted = template.replace("{user}", username)
    name = re.sub(r"[^a-z0-9_-]", "-", wanted.lower())
    if name[:1] not in "abcdefghijklmnopqrstuvwxyz_" or not name:
        name = f"_{name}"
    if name != wanted or len(name) > MAX_NAME:
        digest = hashlib.sha256(wanted.encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9].rstrip('-')}-{digest}"
    return name


def uid_min(path: str = "/etc/login.defs") -> int:
    """The first uid of an ordinary (non-system) account, as useradd sees it."""
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "UID_MIN":
                    return int(parts[1])
    except (OSError, ValueError):
        pass
    return DEFAULT_UID_MIN


def useradd(name: str) -> None:
    """Create ``name``: a home, /bin/sh, a group of its own, no password (locked)."""
    if not POSIX_NAME.match(name):
        raise AccountError(f"{name!r} is not a valid POSIX user name")
    done = subprocess.run(
        ["useradd", "--create-home", "--shell", "/bin/sh", "--user-group", "--", name],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise AccountError(f"useradd {name} failed: {done.stderr.strip() or done.returncode}")
    # Its home holds its checkpoints: its own, whatever HOME_MODE this system's useradd has.
    os.chmod(pwd.getpwnam(name).pw_dir, 0o700)


@dataclass
class Accounts:
    """Resolves (and creates) workload accounts; one per server, so creation is serialized."""

    template: str = DEFAULT_TEMPLATE
    lookup: Callable[[str], pwd.struct_passwd] = pwd.getpwnam
    create: Callable[[str], None] = useradd
    first_uid: int = -1
    # --run-as account:NAME: every workload runs as this one (checked at start).
    fixed: RunAs | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        if self.first_uid < 0:
            self.first_uid = uid_min()

    def resolve(self, username: str | None, os_user: str | None) -> RunAs:
        """The account for a workload of ``username`` (whose record names ``os_user``)."""
        if self.fixed is not None:
            return self.fixed
        if os_user:
            if not POSIX_NAME.match(os_user):
                raise AccountError(f"osUser {os_user!r} is not a valid POSIX user name")
            entry = self._find(os_user)
            if entry is None:
                raise AccountError(
                    f"the OS account {os_user!r} (osUser of user {username!r}) does not exist "
                    "on the server's machine: create it, or change the user's osUser"
                )
            return self._checked(entry, explicit=True)
        if not username:
            raise AccountError(
                "the workload's submitter no longer exists, so there is no account to run it as"
            )
        name = mapped_name(username, self.template)
        with self._lock:
            entry = self._find(name)
            if entry is None:
                try:
                    self.create(name)
                except AccountError:
                    if self._find(name) is None:  # not made meanwhile by another server
                        raise
                entry = self._find(name)
                if entry is None:
                    raise AccountError(f"the account {name!r} was not found after useradd")
        return self._checked(entry, explicit=False)

    def _find(self, name: str) -> pwd.struct_passwd | None:
        try:
            return self.lookup(name)
        except KeyError:
            return None

    def _checked(self, entry: pwd.struct_passwd, *, explicit: bool) -> RunAs:
        if entry.pw_uid == 0 or entry.pw_gid == 0:
            raise AccountError(
                f"the OS account {entry.pw_name!r} has uid or gid 0: workloads never run as root"
            )
        if not explicit and entry.pw_uid < self.first_uid:
            raise AccountError(
                f"the mapped account {entry.pw_name!r} is an existing system account "
                f"(uid {entry.pw_uid} < UID_MIN {self.first_uid}): set the user's osUser, "
                "or choose another --run-as-template"
            )
        return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def check_python(python: str, *, account: str = "nobody") -> Probe:
    """Refuse a workload interpreter an unprivileged account cannot run, naming the flag;
    what that account found (``workload_python.Probe``) when it can."""
    # As pods get it: the interpreter, and ringleader (keepalive) on the allow-listed
    # PYTHONPATH, both readable by someone who is not the server.
    found = probe(python, account=account, pythonpath=os.environ.get("PYTHONPATH"))
    if not found.runs_pods:
        raise InvalidSpec(
            f"{python}: an unprivileged user ({account}) cannot run it "
            f"and import ringleader ({found.cannot_run or found.ringleader}); workloads run "
            "as unprivileged accounts, so name an interpreter they can run with ringleader "
            "installed (`sudo ringleader workload-python` makes one), or /usr/bin/python3 "
            "with PYTHONPATH naming a ringleader source directory they can read",
            "--workload-python",
        )
    return found


# ----- --run-as account:NAME -------------------------------------------------------------
#: Variables sudo itself sets or keeps by default (sudoers: env_reset, env_keep): what
#: may reach the account besides LC_* and SUDO_*; anything else of the server's leaked.
SUDO_ENVIRONMENT = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "MAIL", "TERM", "TZ", "LANG", "LANGUAGE",
     "LINGUAS", "COLORS", "DISPLAY", "HOSTNAME", "KRB5CCNAME", "LS_COLORS", "PS1", "PS2",
     "XAUTHORITY", "XAUTHORIZATION", "XDG_CURRENT_DESKTOP"}
)  # fmt: skip
CANARY = "RINGLEADER_SUDO_CANARY"


def fixed_account(name: str, python: str, private: list[str], *, euid: int | None = None) -> RunAs:
    """The account of ``--run-as account:NAME``, checked: it exists and is neither root
    nor the server's own; as root, it can run ``python``; else ``sudo`` lets this
    server run ``launch/account.py`` as it without a password, a dry run as it works,
    receives none of the server's variables and cannot read any of ``private``."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise InvalidSpec(
            f"there is no OS account {name!r} on this machine (create it, e.g. "
            f"useradd --create-home --shell /bin/sh {name})",
            "--run-as",
        ) from None
    euid = os.geteuid() if euid is None else euid
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise InvalidSpec(
            f"account:{name} has uid or gid 0: workloads never run as root", "--run-as"
        )
    if entry.pw_uid == euid:
        raise InvalidSpec(
            f"account:{name} is the server's own account; name a separate one", "--run-as"
        )
    account = RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)
    if euid == 0:  # root switches itself, as for --run-as user
        check_python(python, account=name)
        return account
    sudo = shutil.which("sudo")
    try:
        server = pwd.getpwuid(euid).pw_name
    except KeyError:
        server = f"#{euid}"  # sudoers' name for a uid without an account
    rule = f"  {sudo_rule(server, name, python)}\n(visudo -f /etc/sudoers.d/ringleader)"
    if sudo is None:
        raise InvalidSpec(
            f"a non-root server runs workloads as {name} through sudo, which is not on PATH "
            f"(apt-get install sudo); then allow it with this rule:\n{rule}",
            "--run-as",
        )
    listed = _run([sudo, "-n", "-l", "-u", name, "--", python, "-I", "-m", MODULE, "check"])
    if listed.returncode != 0:
        raise InvalidSpec(
            f"sudo does not let {server} run {python} -I -m {MODULE} as {name} "
            f"without a password; allow exactly that with this rule:\n{rule}",
            "--run-as",
        )
    canary = secrets.token_hex(8)
    dry = _run(sudo_argv(sudo, name, python, "check", *private), {CANARY: canary})
    report = _report(dry.stdout)
    if dry.returncode != 0 or report is None:
        last = (dry.stderr.strip().splitlines() or [f"exit {dry.returncode}"])[-1]
        raise InvalidSpec(
            f"{python} -I -m {MODULE} failed as {name} through sudo ({last}): sudo passes no "
            "PYTHONPATH, so name an interpreter that imports ringleader by itself (a virtual "
            "environment with ringleader installed, made from /usr/bin/python3)",
            "--workload-python",
        )
    leaked = sorted(
        k
        for k in report.get("environ", [])
        if k == CANARY
        or (k in os.environ and k not in SUDO_ENVIRONMENT and not k.startswith(("LC_", "SUDO_")))
    )
    if leaked:
        raise InvalidSpec(
            f"sudo passes the server's environment to {name} ({', '.join(leaked)}); "
            "keep 'Defaults env_reset' and give the rule no SETENV or env_keep",
            "--run-as",
        )
    if report.get("uid") != entry.pw_uid:
        raise InvalidSpec(
            f"sudo ran the dry run as {name} with uid {report.get('uid')}", "--run-as"
        )
    if report.get("reachable"):
        raise InvalidSpec(
            f"{name} can read the server's {', '.join(report['reachable'])}; make "
            "them the server's alone (chmod 700 the data directory)",
            "--run-as",
        )
    return dataclasses.replace(account, sudo=sudo)


def _run(argv: list[str], extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``argv`` with the server's environment (plus ``extra``), from ``/``, bounded."""
    try:
        return subprocess.run(
            argv,
            env={**os.environ, **(extra or {})},
            cwd="/",
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 1, "", str(exc))


def _report(stdout: str) -> dict[str, Any] | None:
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def accounts_for(config: ServerConfig) -> Accounts | None:
    """Who the server's workloads run as: resolved per user (``--run-as user``), the one
    account of ``--run-as account:NAME`` (checked now unless the CLI already did), or
    None: as the server (``--run-as server``)."""
    if config.run_as == RUN_AS_USER:
        return Accounts(config.run_as_template)
    name = account_name(config.run_as)
    if name is None:
        return None
    fixed = config.account or fixed_account(
        name, config.workload_python, private_paths(config.data_dir)
    )
    return Accounts(config.run_as_template, fixed=fixed)


def private_paths(data_dir: Path) -> list[str]:
    """What the workloads' account must not read: the server's data directory and its
    secrets (were the directory's own mode ever loosened)."""
    return [str(data_dir), str(data_dir / "credentials.json"), str(data_dir / "ringleader.db")]

"""Which OS account a workload's code runs as: never the server's own.

Nomenclature:
- *run-as mode* (``ringleader server --run-as``): ``user`` (each workload
  runs as an unprivileged account of its submitter; the default when the
  server is root) or ``server`` (as the server's own user: what a non-root
  server can do, with no isolation from the server's files);
- *explicit account*: a user's ``os_user`` (``ringleader user create NAME
  --os-user ACCOUNT``); it must exist, ringleader never creates it;
- *mapped account*: otherwise, ``--run-as-template`` (default ``rl-{user}``)
  applied to the ringleader user name, made a valid POSIX name, and created
  on first use (``useradd --create-home --shell /bin/sh --user-group``, no
  password) under a lock.

Invariants: an account is resolved when a workload starts, from the user's
record, never from its spec; resolution never falls back to root: uid or gid
0 is refused, as is a mapped name that is an existing system account (uid
below ``UID_MIN``) — only an explicit ``os_user`` may name one; a name that
had to be changed to be valid gets a hash of the original, so two ringleader
users never map to one account.  Commands are argv lists; names are checked
against ``POSIX_NAME`` before any command sees them.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ringleader.errors import InvalidSpec, RingleaderError
from ringleader.server.backends.base import RunAs

RUN_AS_USER = "user"
RUN_AS_SERVER = "server"
RUN_AS_MODES = (RUN_AS_USER, RUN_AS_SERVER)
DEFAULT_TEMPLATE = "rl-{user}"
POSIX_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
MAX_NAME = 32
DEFAULT_UID_MIN = 1000


class AccountError(RingleaderError):
    """No account a workload may run as: it fails with this reason, nothing runs."""


def check_run_as(mode: str, template: str, *, euid: int | None = None) -> None:
    """Refuse at start what cannot work, naming the flag."""
    if mode not in RUN_AS_MODES:
        raise InvalidSpec(f"must be user or server, not {mode!r}", "--run-as")
    if mode == RUN_AS_USER and (os.geteuid() if euid is None else euid) != 0:
        raise InvalidSpec(
            "--run-as user needs a server running as root (only root can run workloads as "
            "other OS users); start it as root, or pass --run-as server (every workload then "
            "runs as the server's own user and can read its files)",
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

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        if self.first_uid < 0:
            self.first_uid = uid_min()

    def resolve(self, username: str | None, os_user: str | None) -> RunAs:
        """The account for a workload of ``username`` (whose record names ``os_user``)."""
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


def check_python(python: str, *, account: str = "nobody") -> None:
    """Refuse a workload interpreter an unprivileged account cannot run, naming the flag."""
    problem = ""
    try:
        entry = pwd.getpwnam(account)
        # As pods get it: the interpreter, and ringleader (keepalive) on the allow-listed
        # PYTHONPATH, both readable by someone who is not the server.
        path = os.environ.get("PYTHONPATH")
        done = subprocess.run(
            [python, "-c", "import ringleader.launch.keepalive"],
            user=entry.pw_uid,
            group=entry.pw_gid,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin", **({"PYTHONPATH": path} if path else {})},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            last = done.stderr.strip().splitlines()[-1:]
            problem = last[0] if last else f"exit {done.returncode}"
    except (KeyError, OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    if problem:
        raise InvalidSpec(
            f"{python}: an unprivileged user ({account}) cannot run it "
            f"and import ringleader ({problem}); workloads run as unprivileged accounts, so "
            "name an interpreter they can run (e.g. --workload-python /usr/bin/python3) with "
            "PYTHONPATH naming a ringleader source directory they can read",
            "--workload-python",
        )

"""What the agent needs around one rank's process: where its files go (a private run
dir), which account and cores it runs on, and the error file it leaves behind.

Invariants: a run dir is a fresh private directory (``private_dir``: random name,
0700), never one someone planted; ranks are never started as root by mistake
(``run_as_ids`` refuses uid/gid 0 and malformed values loudly); pinning is best
effort. Standard library only: the agent imports this module and must start fast.
"""

from __future__ import annotations

import os
import threading

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from subprocess import Popen
    from typing import Any

#: ringleader.runtime.env.CPU_AFFINITY (the runtime package is not imported here).
CPU_AFFINITY = "RINGLEADER_CPU_AFFINITY"


def pin(pid: int, cores: str) -> bool:
    """Pin a just-started rank to ``cores`` ("0,1"), where the OS allows it.

    Done right after the spawn, before the interpreter has started any thread
    (children inherit the mask). Not allowed (no such cores in this cgroup, no
    sched_setaffinity on this OS): the rank runs unpinned.
    """
    if not cores or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        os.sched_setaffinity(pid, {int(c) for c in cores.split(",")})
    except (OSError, ValueError):
        return False
    return True


#: Set by the detached supervisor (``launch.json``'s ``run_as``): "UID:GID" ranks run as.
RUN_AS_VAR = "RINGLEADER_RUN_AS"


def run_as_ids(value: str) -> tuple[int, int] | None:
    """``(uid, gid)`` from ``RINGLEADER_RUN_AS``; None when unset.  A malformed value or
    uid/gid 0 is refused loudly: ranks are never started as root by mistake."""
    if not value:
        return None
    uid, sep, gid = value.partition(":")
    if not (sep and uid.isdigit() and gid.isdigit()) or int(uid) == 0 or int(gid) == 0:
        raise SystemExit(f"ringleader agent: bad {RUN_AS_VAR}={value!r}")
    return int(uid), int(gid)


def as_account(account: tuple[int, int] | None) -> dict[str, Any]:
    """Popen's arguments that drop a rank to ``account`` (no supplementary groups)."""
    if account is None:
        return {}
    return {"user": account[0], "group": account[1], "extra_groups": []}


def hand_over(attempt_dir: str, uid: int, gid: int) -> None:
    """Let the account write its rank's error file: the agent's run dir (root, 0700)
    becomes 0711 (enter, not list) and the attempt's directory the account's."""
    os.chmod(os.path.dirname(attempt_dir), 0o711)
    os.chown(attempt_dir, uid, gid)
    os.chmod(attempt_dir, 0o700)


class RankProcess:
    """One running rank: its process, output readers and a flag set once reported."""

    __slots__ = ("done", "hung", "marker", "proc", "rank", "readers")

    def __init__(self, rank: int, proc: Popen[bytes], marker: str | None = None) -> None:
        self.rank = rank
        self.proc = proc
        self.readers: list[threading.Thread] = []
        self.done = threading.Event()
        self.marker = marker  # the hung-teardown marker of an armed rank
        self.hung = False  # killed by the hung-teardown rule


def read_error_file(path: str, anchor: str | None = None) -> dict[str, Any] | None:
    """The traceback a rank recorded, if the runtime helper or torch wrote one.

    The rank (maybe another account) owns the file and its directory: it is read
    from ``anchor`` (the agent's own run dir) through ``tenantfs``, capped,
    never through a link, a FIFO or a hard link (``runtime.errorfile``)."""
    from ringleader.runtime.errorfile import read_error_file as read

    try:
        return read(path, anchor=anchor)
    except Exception:  # a malformed error file must not hide the exit itself
        return None


def run_dir_prefix(job_id: str) -> str:
    """The start of every agent run dir's name for ``job_id`` (``ringleader-ID-node``):
    the agent names its own so, and a sweep finds what an agent left by it."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in job_id)
    return f"ringleader-{safe}-node"


def private_dir(base: str, prefix: str) -> str:
    """A new directory in ``base`` that only we can use: tempfile.mkdtemp, without tempfile.

    Its name ends in 16 random hex digits, so no one can plant anything at it
    beforehand; ``mkdir`` creates it 0700 or fails when the name exists in any
    form (a directory someone else made, a symlink, a file): it never follows
    a link or reuses what it did not create.
    """
    for _ in range(100):
        path = os.path.join(base, prefix + os.urandom(8).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free name for {prefix}* in {base}")


def temp_dir() -> str:
    """Where run dirs go without a ``tmpdir``: what tempfile would pick, found cheaply."""
    for base in (*(os.environ.get(n, "") for n in ("TMPDIR", "TEMP", "TMP")), "/tmp"):
        if base and os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            return base
    import tempfile  # the rare rest: /var/tmp, the working directory ...

    return tempfile.gettempdir()

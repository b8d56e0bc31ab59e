"""Which process is a rank: the pid the agent got from the kernel when it spawned it.

Why: a process's environment (``RINGLEADER_JOB_ID``, ``RANK``) is its own to
set, so any tenant can forge one; the pid ``Popen`` returned cannot be.  So
the agent records each rank it starts, and ``exec`` trusts that record (and
the pod's cgroup, ``server/backends/local/cgroups.py``), never a marker.

The record: one line per spawn, ``"RANK PID START_TICKS\\n"``, appended by
the agent to the file ``RECORD_VAR`` names in its own environment (never a
rank's: the agent drops it from theirs).  Under a server that is
``SPAWNED_FILE`` in the run directory, which is the server's (0700): the
agent is the server's own user there (root under ``--run-as user``), so no
tenant writes or reads it.  Through sudo (``--run-as account:NAME``) the agent is
the account, which cannot write there: the supervisor records the agent it starts
instead (``AGENT_RANK``).  A later line for a rank (a restart) wins.  A
recorded pid is trusted only while ``/proc`` shows a process of the same
start time under it (a reused pid belongs to a process that started later),
running as the pod's account.

Invariants: standard library and ``ringleader.launch.procs`` only (the agent
imports this on every launch); reading is bounded (``MAX_BYTES``) and never
follows a symlink or blocks on a FIFO.
"""

from __future__ import annotations

import os

from ringleader.launch.procs import start_ticks

#: In the agent's own environment: the file it appends its spawns to (none: no record).
RECORD_VAR = "RINGLEADER_SPAWN_RECORD"
#: The record's "rank" of a local agent the supervisor started through sudo: that agent
#: runs as the account and cannot write the record, so its ranks are known as the
#: account's processes below it (``account.pod_process``).
AGENT_RANK = -2
SPAWNED_FILE = "spawned"
MAX_BYTES = 1 << 20  # ~40,000 spawns: restarts times ranks, far past any real run


def record(path: str | None, rank: int, pid: int) -> None:
    """Append ``rank``'s spawn (its pid and start time) to ``path``; best effort: a
    record that cannot be written leaves exec to the pod's cgroup alone."""
    ticks = start_ticks(pid)  # the child is not reaped yet: its stat is still there
    if not path or ticks is None:
        return
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError:
        return
    try:
        os.write(fd, f"{rank} {pid} {ticks}\n".encode())
    except OSError:
        pass
    finally:
        os.close(fd)


def recorded(path: str) -> dict[int, tuple[int, int]]:
    """rank -> ``(pid, start ticks)`` of its latest recorded spawn; {} without a record."""
    from ringleader.tenantfs import read_or_none

    data = read_or_none(path, MAX_BYTES) or b""  # never a link, a FIFO, more than the cap
    found: dict[int, tuple[int, int]] = {}
    for line in data.decode("ascii", "replace").splitlines():
        fields = line.split()
        if len(fields) == 3 and all(f.lstrip("-").isdigit() for f in fields):
            rank, pid, ticks = map(int, fields)
            if pid > 0:
                found[rank] = (pid, ticks)
    return found


def uids(pid: int) -> tuple[int, int] | None:
    """A process's real and effective uid (``/proc/PID/status``), None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Uid:"):
            fields = line.split()[1:3]
            if len(fields) == 2 and all(f.isdigit() for f in fields):
                return int(fields[0]), int(fields[1])
    return None


def runs_as(pid: int, uid: int) -> bool:
    """Whether the process runs as ``uid`` (real and effective: not a set-uid program)."""
    return uids(pid) == (uid, uid)


def is_spawned(pid: int, ticks: int) -> bool:
    """Whether ``pid`` is still the process recorded with ``ticks`` (not a reused pid)."""
    return start_ticks(pid) == ticks

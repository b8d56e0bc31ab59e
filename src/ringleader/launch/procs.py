"""Stopping process groups and sweeping stragglers: the no-orphans mechanics.

Every rank is started as the leader of its own session/process group, so a
signal to the group reaches the rank and everything it spawned.  A
descendant that escaped the group (``setsid``, a daemon) still carries the
job's id in its environment (``RINGLEADER_JOB_ID``), so on Linux a sweep of
``/proc`` finds it.  Stopping is SIGTERM, a grace period, then SIGKILL.

The marker is the user's to drop (``env -i setsid ...``), so under the
control plane the kernel keeps the list instead: the local backend runs each
workload in a cgroup (``server/backends/local/cgroups.py``) and ends what is
left in it; this sweep is its fallback where no cgroup can be made, and
``ringleader launch`` without a server relies on it alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator


def signal_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False when no member is left."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _read(path: str) -> bytes:
    """A whole /proc file (os-level: pathlib would slow the agent's start)."""
    with open(path, "rb") as f:
        return f.read()


def _stat_fields(stat: str) -> list[str]:
    """Fields of /proc/PID/stat after the command name: state, ppid, pgrp, ..."""
    return stat.rsplit(")", 1)[-1].split()


def group_alive(pgid: int) -> bool:
    """True while a live (not zombie) process is in the group.

    Zombies count as members for ``killpg(pgid, 0)``; an orphaned grandchild
    stays a zombie until init reaps it, which would stretch every stop.
    """
    if not os.path.isdir("/proc"):
        return signal_group(pgid, 0)
    return any(fields[2] == str(pgid) and fields[0] != "Z" for _, fields in _stats())


def _stats() -> Iterator[tuple[int, list[str]]]:
    """Each process's pid and stat fields (state, ppid, pgrp, ...) as /proc has them."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            yield int(name), _stat_fields(_read(f"/proc/{name}/stat").decode())
        except OSError:
            continue


def pids_with_marker(marker: str, *, exclude: Iterable[int] = ()) -> list[int]:
    """Processes whose environment holds the entry ``marker`` (Linux only)."""
    skip = {os.getpid(), *exclude}
    needle = marker.encode()
    found: list[int] = []
    if not os.path.isdir("/proc"):
        return found
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            environ = _read(f"/proc/{name}/environ")
            stat = _read(f"/proc/{name}/stat").decode()
        except OSError:
            continue
        if _stat_fields(stat)[0] == "Z":
            continue
        if needle in environ.split(b"\0"):
            found.append(int(name))
    return found


def terminate(
    pgids: Iterable[int],
    grace_s: float,
    *,
    marker: str | None = None,
    is_done: Callable[[], bool] | None = None,
) -> None:
    """SIGTERM every group, wait up to ``grace_s``, SIGKILL what remains.

    ``is_done`` lets the caller end the wait early (e.g. all ranks reaped).
    With ``marker`` the /proc sweep catches descendants that left their group.
    """
    # Only groups that still had a member when signalled need waiting for.
    pgids = [pgid for pgid in pgids if signal_group(pgid, signal.SIGTERM)]
    swept = pids_with_marker(marker) if marker else []
    for pid in swept:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    if not pgids and not swept and (is_done is None or is_done()):
        return  # nothing of the job is left (ranks that ended, an agent's goodbye)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        groups_left = any(group_alive(p) for p in pgids)
        sweep_left = bool(marker and pids_with_marker(marker))
        if not groups_left and not sweep_left and (is_done is None or is_done()):
            break
        time.sleep(0.02)
    for pgid in pgids:
        signal_group(pgid, signal.SIGKILL)
    if marker:
        for pid in pids_with_marker(marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def process_environ(pid: int) -> dict[str, str] | None:
    """A live process's environment (None: gone, a zombie or not ours to read)."""
    try:
        raw = _read(f"/proc/{pid}/environ")
        if _stat_fields(_read(f"/proc/{pid}/stat").decode())[0] == "Z":
            return None
    except OSError:
        return None
    entries = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in entries}


def start_ticks(pid: int) -> int | None:
    """When a process started (clock ticks since boot): orders a rank before its children."""
    try:
        return int(_stat_fields(_read(f"/proc/{pid}/stat").decode())[19])
    except (OSError, IndexError, ValueError):
        return None


def process_argv(pid: int) -> list[bytes] | None:
    """A live process's argv, None when it is gone or a zombie."""
    try:
        stat = _read(f"/proc/{pid}/stat").decode(errors="replace")
        argv = _read(f"/proc/{pid}/cmdline").split(b"\0")
    except OSError:
        return None
    return None if _stat_fields(stat)[0] == "Z" else argv


def descendants(roots: Iterable[int]) -> set[int]:
    """``roots`` and every live process below them, by parent pid: a kernel fact, where
    an environment is the process's own to forge.  (A process that left by forking
    twice is re-parented away and not found: what a pod's cgroup is for.)"""
    todo = list(roots)
    if not todo:  # nothing to look below: no walk of /proc
        return set()
    children: dict[int, list[int]] = {}
    for pid, fields in _stats():
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(pid)
    found: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def job_processes(run_id: str) -> list[int]:
    """Every live process of a job: ranks by their env marker, agents by argv.  Both
    can be forged by anyone, so this is for sweeping (a forger only loses its own
    process), never for choosing whom to hand power (``account.pod_process``)."""
    pids = set(pids_with_marker(f"RINGLEADER_JOB_ID={run_id}"))
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        argv = process_argv(int(name)) or []
        if b"ringleader.launch.agent" in argv and run_id.encode() in argv:
            pids.add(int(name))
    return sorted(pids)

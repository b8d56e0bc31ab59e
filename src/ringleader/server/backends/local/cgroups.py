"""Kernel-tracked process trees for the local backend: a cgroup per workload and per pod.

Why: an environment marker (``RINGLEADER_JOB_ID``) can be dropped or
overridden by the very processes it is meant to find (``env -i setsid ...``);
cgroup membership is inherited by every child and only a write to
``cgroup.procs`` changes it, so the kernel keeps the list for us.

Nomenclature:
- *hierarchy*: where cgroups live, under ``/sys/fs/cgroup`` or
  ``$RINGLEADER_CGROUP_ROOT`` (a hybrid host's ``/sys/fs/cgroup/unified``).
  v2: one unified tree (its root has ``cgroup.controllers``).  v1: one tree
  per controller; we use ``freezer`` (stop everything at once), ``memory``,
  ``cpu``, ``cpuacct`` and ``pids`` where mounted;
- *parent*: ringleader's cgroup, ``ringleader`` under the server's own
  cgroup in each v1 tree (workloads stay inside whatever box the server is
  in), under the root of the v2 tree (the one cgroup whose processes do not
  forbid enabling controllers below it);
- *run cgroup*: ``PARENT/<run id>`` (``rl-<workload id>``), made before the
  supervisor starts; it holds ``supervisor`` (the detached supervisor, its
  agent, mpirun) and one leaf per pod (``PARENT/<run id>/<pod name>``) with
  the pod's ranks and everything they spawn, where limits apply and usage is
  read;
- *joining*: a process enters its cgroup before its command runs: ``join_argv``
  prefixes the command with a POSIX shell that writes its own pid into each
  ``cgroup.procs`` named by ``RINGLEADER_CGROUP``, unsets it, and ``exec``s
  the command (same pid, so nothing of the command ever runs outside).

- *modes*: no account lists what runs: the parent is 0711 (enter, not list),
  every cgroup below it is made 0700 (root's), and ``hand_over`` opens a pod's
  cgroup (0750) and its run's (0710) to the pod account's group alone, so a
  rank reaches its own cgroup by path and no other (nor learns its name).

The two kinds of hierarchy (v1, v2) and ``detect``, which picks this host's, are
in ``cgroup_versions``; what a hierarchy does is ``Hierarchy`` here.

Invariants: ``kill`` returns only once the run cgroup holds no process (or
its timeout passed); ``remove`` deletes leaves first; nothing here runs for
``ringleader launch`` without a server (the backend imports this module).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: The variable the join shim reads: the ``cgroup.procs`` files to write, space-separated.
JOIN_VAR = "RINGLEADER_CGROUP"
JOIN_SHIM = (
    f'for f in ${JOIN_VAR}; do echo $$ > "$f" || exit 126; done; unset {JOIN_VAR}; exec "$@"'
)
SUPERVISOR = "supervisor"
PARENT = "ringleader"
V1_REQUIRED = ("freezer", "memory", "cpu", "cpuacct")
V1_OPTIONAL = ("pids",)
V2_CONTROLLERS = ("memory", "cpu", "pids")
V2_LIMITING = ("memory", "cpu")  # what limits (and peak memory) need; tracking needs none
#: Where this host's cgroups are mounted, when not /sys/fs/cgroup: e.g. a hybrid host's
#: unified (v2) tree, /sys/fs/cgroup/unified, instead of its v1 trees.
ROOT_VAR = "RINGLEADER_CGROUP_ROOT"
CPU_PERIOD_US = 100_000
REMOVE_WAIT_S = 5.0  # how long a just-emptied cgroup may stay busy (remove)


@dataclass(frozen=True)
class Limits:
    """What a pod's cgroup enforces (None: nothing), as Kubernetes does: a limit is
    hard (the memory limit kills, the CPU quota throttles), a request is a share
    under contention (CPU weight; memory the kernel reclaims last)."""

    memory_bytes: int | None = None  # hard: the OOM killer past it, no swap
    cpu_cores: float | None = None  # hard: a CFS quota of cores * period
    memory_request_bytes: int | None = None  # v1 soft limit, v2 memory.low
    cpu_request_cores: float | None = None  # v1 cpu.shares, v2 cpu.weight


@dataclass(frozen=True)
class Usage:
    """What the kernel measured of one cgroup (None: not measured here)."""

    peak_memory_bytes: int | None = None
    cpu_seconds: float | None = None
    oom_kills: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "peak_memory_bytes": self.peak_memory_bytes,
            "cpu_seconds": self.cpu_seconds,
            "oom_kills": self.oom_kills,
        }

    @classmethod
    def from_json(cls, data: object) -> Usage:
        if not isinstance(data, dict):
            return cls()
        peak, cpu = data.get("peak_memory_bytes"), data.get("cpu_seconds")
        return cls(
            int(peak) if isinstance(peak, int) else None,
            float(cpu) if isinstance(cpu, int | float) else None,
            int(data.get("oom_kills") or 0),
        )


def join_argv(argv: list[str]) -> list[str]:
    """``argv`` run by a shell that first joins the cgroups named by ``RINGLEADER_CGROUP``."""
    return ["/bin/sh", "-c", JOIN_SHIM, "ringleader-join", *argv]


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


@contextlib.contextmanager
def _unless_gone() -> Iterator[None]:
    """Ignore a cgroup removed meanwhile: a missing file (ENOENT), or one whose cgroup
    was removed between the open and the write (the kernel answers ENODEV), as when a
    pod's kill and its removal race. Any other error still raises."""
    try:
        yield
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno != errno.ENODEV:
            raise


class Hierarchy:
    """One host's cgroups for ringleader: make, join, limit, measure, kill, remove.

    ``rel`` arguments are paths under the parent (``rl-x`` or ``rl-x/pod``).
    """

    isolation = "cgroup"

    def __init__(self, parents: dict[str, Path]) -> None:
        self.parents = parents  # controller (or "unified") -> the parent cgroup's directory

    # ----- shape -------------------------------------------------------------------
    def dirs(self, rel: str) -> list[Path]:
        """The cgroup's directory in each distinct tree (comounted controllers once)."""
        seen: dict[str, Path] = {}
        for parent in self.parents.values():
            seen.setdefault(os.path.realpath(parent), parent / rel)
        return list(seen.values())

    def procs_files(self, rel: str) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs(rel)]

    def exists(self, rel: str) -> bool:
        return any(d.is_dir() for d in self.dirs(rel))

    def runs(self) -> list[str]:
        """The run cgroups under the parent."""
        names: set[str] = set()
        for parent in self.parents.values():
            with contextlib.suppress(OSError):
                names.update(e.name for e in os.scandir(parent) if e.is_dir())
        return sorted(names)

    def create(self, rel: str, limits: Limits = Limits()) -> None:
        depth = len(Path(rel).parts) if rel != "." else 0
        for d in self.dirs(rel):
            make(d, depth)
        self.limit(rel, limits)

    def hand_over(self, rel: str, uid: int, gid: int) -> None:
        """Let the account ``uid`` move its own processes into ``rel`` (a pod's cgroup),
        so its join shim runs as the account: the membership files become its own.
        Every other cgroup's stay root's, so it can join no other pod's.  The way
        there opens to the account's group only: its run's cgroup 0710 (enter), the
        pod's 0750 (enter and list its own files); the parent stays 0711."""
        for name in self.membership_files(rel):
            os.chown(name, uid, gid)
        for d in self.dirs(rel):
            for depth, cgroup in enumerate([d, *list(d.parents)[: len(Path(rel).parts) - 1]]):
                os.chown(cgroup, 0, gid)
                os.chmod(cgroup, 0o750 if depth == 0 else 0o710)

    def membership_files(self, rel: str) -> list[str]:
        """What a process writes to move into ``rel``; v1 also has ``tasks`` (threads)."""
        return [str(d / f) for d in self.dirs(rel) for f in ("cgroup.procs", "tasks")]

    @contextlib.contextmanager
    def lock(self, exclusive: bool = False) -> Iterator[None]:
        """Held (shared) while a run cgroup is made and its supervisor joins it, and
        (exclusive) while empty run cgroups are cleaned away, so a cleaner never
        removes one a starting supervisor is about to join.  Machine-wide: every
        server on this host shares the parent (an flock on its directory)."""
        fd = os.open(next(iter(self.parents.values())), os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    def limit(self, rel: str, limits: Limits) -> None:
        raise NotImplementedError

    # ----- processes -----------------------------------------------------------------
    def pids(self, rel: str) -> set[int]:
        """Every process in the cgroup and below it, in any tree."""
        found: set[int] = set()
        for top in self.dirs(rel):
            for d in _walk(top):
                text = _read(d / "cgroup.procs") or ""
                found.update(int(p) for p in text.split() if p.isdigit())
        return found

    def kill(self, rel: str, timeout_s: float = 10.0) -> bool:
        """SIGKILL every process of the cgroup's subtree, frozen first so none can
        fork or escape meanwhile; True once it is empty."""
        if not self.exists(rel):
            return True
        self._kill_all(rel)
        deadline = time.monotonic() + timeout_s
        while self.pids(rel):
            if time.monotonic() > deadline:
                return False
            self._kill_all(rel)  # one that was mid-fork when frozen
            time.sleep(0.01)
        return True

    def _kill_all(self, rel: str) -> None:
        self.freeze(rel, True)
        try:
            for pid in self.pids(rel):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        finally:
            self.freeze(rel, False)  # a frozen process dies of SIGKILL only once thawed

    def freeze(self, rel: str, frozen: bool) -> None:
        raise NotImplementedError

    # ----- measures ------------------------------------------------------------------
    def usage(self, rel: str) -> Usage:
        raise NotImplementedError

    # ----- removal -------------------------------------------------------------------
    def remove(self, rel: str) -> None:
        """Delete the cgroup and its children (leaves first); a missing one is fine.
        A cgroup still busy (EBUSY) is tried again for up to ``REMOVE_WAIT_S``: in v1 a
        task just killed leaves each hierarchy on its own, so one can still hold it
        for a moment after another's list is empty."""
        for top in self.dirs(rel):
            for d in reversed(list(_walk(top))):
                deadline = time.monotonic() + REMOVE_WAIT_S
                while True:
                    try:
                        self.rmdir(d)
                    except FileNotFoundError:
                        pass
                    except OSError as exc:
                        if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                            raise
                        time.sleep(0.02)
                        continue
                    break

    def rmdir(self, path: Path) -> None:
        os.rmdir(path)


def make(path: Path, below_parent: int) -> None:
    """``path`` and what is missing of it ``below_parent`` levels under the parent,
    each made 0700 (root's: no account lists or enters it before ``hand_over``);
    with 0, the parent itself, made (or kept) 0711: entered by a name, never listed."""
    if below_parent == 0:
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o711)
        return
    for made in reversed([path, *list(path.parents)[: below_parent - 1]]):  # top-down
        try:
            made.mkdir(parents=True)
        except FileExistsError:
            continue
        os.chmod(made, 0o700)


def _walk(top: Path) -> Iterator[Path]:
    """``top`` and every cgroup below it, parents before children."""
    if not top.is_dir():
        return
    yield top
    with contextlib.suppress(OSError):
        for entry in sorted(os.scandir(top), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                yield from _walk(Path(entry.path))

"""The two kinds of cgroup hierarchy the local backend drives: v1 (a tree per
controller) and v2 (one unified tree), each a ``cgroups.Hierarchy``.

Split from ``cgroups`` (what a hierarchy is, its parent, joining, modes: that
module's docstring) so each file stays one idea; ``detect`` (here) picks one.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from ringleader.launch.podstats import int_of, keyed_number
from ringleader.server.backends.local.cgroups import (
    CPU_PERIOD_US,
    PARENT,
    ROOT_VAR,
    V1_OPTIONAL,
    V1_REQUIRED,
    V2_CONTROLLERS,
    V2_LIMITING,
    Hierarchy,
    Limits,
    Usage,
    _read,
    _unless_gone,
    _write,
    make,
)

NO_LIMITS = Limits()


class CgroupV1(Hierarchy):
    """One tree per controller; the freezer stops a subtree at once."""

    isolation = "cgroup-v1"

    def limit(self, rel: str, limits: Limits) -> None:
        memory = self.parents["memory"] / rel
        if limits.memory_bytes:
            _write(memory / "memory.limit_in_bytes", str(limits.memory_bytes))
            swap = memory / "memory.memsw.limit_in_bytes"  # no swapping past the limit
            if swap.exists():
                with contextlib.suppress(OSError):
                    _write(swap, str(limits.memory_bytes))
        if limits.memory_request_bytes:
            _write(memory / "memory.soft_limit_in_bytes", str(limits.memory_request_bytes))
        cpu = self.parents["cpu"] / rel
        if limits.cpu_cores:
            period = int_of(_read(cpu / "cpu.cfs_period_us")) or CPU_PERIOD_US
            _write(cpu / "cpu.cfs_quota_us", str(max(1000, round(limits.cpu_cores * period))))
        if limits.cpu_request_cores:  # 1024 shares a core, as Kubernetes
            _write(cpu / "cpu.shares", str(max(2, round(limits.cpu_request_cores * 1024))))

    def freeze(self, rel: str, frozen: bool) -> None:
        state = self.parents["freezer"] / rel / "freezer.state"
        with _unless_gone():
            _write(state, "FROZEN" if frozen else "THAWED")
            deadline = time.monotonic() + 5.0
            while frozen and (_read(state) or "").strip() == "FREEZING":
                if time.monotonic() > deadline:
                    break
                time.sleep(0.005)

    def usage(self, rel: str) -> Usage:
        memory = self.parents["memory"] / rel
        cpu_ns = int_of(_read(self.parents["cpuacct"] / rel / "cpuacct.usage"))
        oom = keyed_number(_read(memory / "memory.oom_control"), "oom_kill")
        return Usage(
            int_of(_read(memory / "memory.max_usage_in_bytes")),
            None if cpu_ns is None else cpu_ns / 1e9,
            oom or 0,
        )


class CgroupV2(Hierarchy):
    """The unified tree: controllers enabled top-down, ``cgroup.kill`` where present.

    Tracking, freezing and killing need no controller (``cgroup.procs``,
    ``cgroup.freeze``, ``cgroup.kill``, ``cpu.stat`` are in every cgroup), so a
    tree whose root cannot hand ``memory`` or ``cpu`` down (a hybrid host binds
    them to v1; a container's root holds processes) still runs workloads: their
    limits are skipped, peak memory is not measured, and ``isolation`` says so.
    """

    def __init__(self, parents: dict[str, Path]) -> None:
        super().__init__(parents)
        self._isolation: str | None = None

    @property
    def top(self) -> Path:
        return self.parents["unified"]

    @property  # type: ignore[override]
    def isolation(self) -> str:
        """``cgroup-v2``, or ``cgroup-v2-without-memory,cpu`` (the limiting controllers
        the root does not hand down), read once the tree is made."""
        if self._isolation is None:
            control = _read(self.top.parent / "cgroup.subtree_control") or ""
            missing = [c for c in V2_LIMITING if c not in control.replace("+", "").split()]
            self._isolation = "cgroup-v2" + (f"-without-{','.join(missing)}" if missing else "")
        return self._isolation

    def create(self, rel: str, limits: Limits = NO_LIMITS) -> None:
        # Controllers reach a cgroup through its parent's subtree_control; only
        # cgroups without processes of their own may enable them (the leaves hold them).
        self._enable(self.top.parent)
        path = self.top
        make(path, 0)
        for part in Path(rel).parts if rel != "." else ():
            self._enable(path)
            path = path / part
            make(path, 1)
        self.limit(rel, limits)

    def membership_files(self, rel: str) -> list[str]:
        """v2 also asks for write access to the common ancestor's ``cgroup.procs`` (the
        run's: a rank moves from ``supervisor`` to its pod); the run's cgroup has
        controllers enabled below it, so no process can stay in it."""
        files = [str(self.top / rel / "cgroup.procs")]
        if "/" in rel:
            files.append(str(self.top / rel.split("/")[0] / "cgroup.procs"))
        return files

    def _enable(self, cgroup: Path) -> None:
        available = (_read(cgroup / "cgroup.controllers") or "").split()
        enabled = (_read(cgroup / "cgroup.subtree_control") or "").split()
        wanted = [c for c in V2_CONTROLLERS if c in available and c not in enabled]
        if wanted:
            with contextlib.suppress(OSError):  # a cgroup with processes: no limits below
                _write(cgroup / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))

    def limit(self, rel: str, limits: Limits) -> None:
        """Where the root could not hand the memory and cpu controllers down (a
        container whose root cgroup has processes) their files are missing: the
        run is still tracked and killed, but not limited or measured."""
        path, values = self.top / rel, {}
        if limits.memory_bytes:
            values |= {"memory.max": str(limits.memory_bytes), "memory.swap.max": "0"}
        if limits.memory_request_bytes:
            values["memory.low"] = str(limits.memory_request_bytes)
        if limits.cpu_cores:
            quota = max(1000, round(limits.cpu_cores * CPU_PERIOD_US))
            values["cpu.max"] = f"{quota} {CPU_PERIOD_US}"
        if limits.cpu_request_cores:  # weight 100 (the default) a core
            values["cpu.weight"] = str(min(10000, max(1, round(limits.cpu_request_cores * 100))))
        for name, value in values.items():
            if (path / name).exists():
                _write(path / name, value)

    def _kill_all(self, rel: str) -> None:
        kill = self.top / rel / "cgroup.kill"
        if kill.exists():  # Linux 5.14+: the kernel kills the whole subtree, race-free
            with _unless_gone():
                _write(kill, "1")
        else:
            super()._kill_all(rel)

    def freeze(self, rel: str, frozen: bool) -> None:
        path = self.top / rel
        with _unless_gone():
            _write(path / "cgroup.freeze", "1" if frozen else "0")
            deadline = time.monotonic() + 5.0
            while frozen and keyed_number(_read(path / "cgroup.events"), "frozen") == 0:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.005)

    def usage(self, rel: str) -> Usage:
        path = self.top / rel
        usec = keyed_number(_read(path / "cpu.stat"), "usage_usec")
        return Usage(
            int_of(_read(path / "memory.peak")),
            None if usec is None else usec / 1e6,
            keyed_number(_read(path / "memory.events"), "oom_kill") or 0,
        )


# ----- finding the host's hierarchy ----------------------------------------------


def own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as controller -> path (``""`` names the v2 tree)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        for name in controllers.split(",") if controllers else [""]:
            out[name] = path
    return out


def detect(
    root: Path | None = None, self_cgroup: Path = Path("/proc/self/cgroup")
) -> Hierarchy | None:
    """This host's cgroups for ringleader, or None where none can be made here (not
    root, no cgroupfs, macOS): the backend then tracks processes by environment.
    ``root``: where they are mounted (default ``$RINGLEADER_CGROUP_ROOT``, else
    ``/sys/fs/cgroup``); a v2 root is one with ``cgroup.controllers``."""
    root = root or Path(os.environ.get(ROOT_VAR) or "/sys/fs/cgroup")
    own = own_cgroups(_read(self_cgroup) or "")
    hierarchy: Hierarchy
    if (root / "cgroup.controllers").exists():
        hierarchy = CgroupV2({"unified": root / PARENT})
    elif all((root / c).is_dir() for c in V1_REQUIRED):
        controllers = V1_REQUIRED + tuple(c for c in V1_OPTIONAL if (root / c).is_dir())
        hierarchy = CgroupV1(
            {c: root / c / own.get(c, "/").lstrip("/") / PARENT for c in controllers}
        )
    else:
        return None
    try:
        hierarchy.create(".")
    except OSError:
        return None
    ok = all(os.access(p, os.W_OK) for p in hierarchy.parents.values())
    return hierarchy if ok else None

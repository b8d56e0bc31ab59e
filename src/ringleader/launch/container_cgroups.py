"""Where a rank's container goes in the cgroup trees, and what podman leaves there.

Why a module: podman's ``--cgroup-parent`` is one path that it makes in every
cgroup v1 controller, while the server's own cgroup (and so a pod's) may sit at
a different path in each (a host's systemd, a sandbox).  The container goes below
the pod's *memory* cgroup (its memory limit holds, its peak is measured); where
the pod's cpu cgroup is elsewhere, its CPU limits become podman's own flags; and
the directories podman made in the other trees are removed at the run's end.

Standard library only: the agent imports this module (through ``containers``).
"""

from __future__ import annotations

import contextlib
import os


def _pod_dirs(join: str) -> dict[str, str]:
    """controller (v1; "" for v2) -> the pod's cgroup directory, from the join shim's
    ``cgroup.procs`` files (server/backends/local/cgroups.join_argv)."""
    root = os.environ.get("RINGLEADER_CGROUP_ROOT", "/sys/fs/cgroup").rstrip("/")
    v2 = os.path.exists(os.path.join(root, "cgroup.controllers"))
    out: dict[str, str] = {}
    for procs in join.split():
        parts = procs.split("/")
        if len(parts) < 5 or parts[-1] != "cgroup.procs" or not procs.startswith(root + "/"):
            continue
        inside = procs[len(root) + 1 :].split("/")
        out.setdefault("" if v2 else inside[0], os.path.dirname(procs))
    return out


def _below_root(directory: str, controller: str) -> str:
    root = os.environ.get("RINGLEADER_CGROUP_ROOT", "/sys/fs/cgroup").rstrip("/")
    rest = directory[len(root) + 1 :].split("/")
    return "/" + "/".join(rest[1:] if controller else rest)


def cgroup_parent(join: str) -> str:
    """The pod's cgroup as podman's ``--cgroup-parent`` wants it (from the root of a
    hierarchy); "" without one.  podman makes that one path in every v1 controller,
    while the server's own cgroup (and so the pod's) may sit at another path in each:
    the memory controller's is taken, so the pod's memory limit holds for the
    container and its peak is measured (``v1_cpu_flags`` carries the CPU limit)."""
    dirs = _pod_dirs(join)
    for controller in ("", "memory", *sorted(dirs)):
        if controller in dirs:
            return _below_root(dirs[controller], controller)
    return ""


def v1_cpu_flags(join: str) -> list[str]:
    """podman's own CPU limits, as the pod's cpu cgroup has them, where that cgroup is
    at another path than ``cgroup_parent`` (the container is not inside it then)."""
    dirs = _pod_dirs(join)
    cpu, memory = dirs.get("cpu"), dirs.get("memory")
    if cpu is None or memory is None or _below_root(cpu, "cpu") == _below_root(memory, "memory"):
        return []
    try:
        with open(os.path.join(cpu, "cpu.shares")) as shares:
            out = ["--cpu-shares", shares.read().strip()]
        with open(os.path.join(cpu, "cpu.cfs_quota_us")) as quota:
            limit = quota.read().strip()
        with open(os.path.join(cpu, "cpu.cfs_period_us")) as period:
            every = period.read().strip()
    except OSError:
        return []
    if limit.lstrip("-").isdigit() and int(limit) > 0:
        out += ["--cpu-period", every, "--cpu-quota", limit]
    return out


def leftover_cgroups(run_rel: str, root: str = "/sys/fs/cgroup") -> list[str]:
    """The run's directories (``run_rel``: its cgroup from a hierarchy's root) in every
    v1 controller tree: podman's ``--cgroup-parent`` makes the path in each, also in
    those ringleader does not use (blkio, cpuset, devices ...); bottom-up."""
    found: list[str] = []
    with contextlib.suppress(OSError):
        for tree in sorted(os.scandir(root), key=lambda e: e.name):
            top = os.path.join(tree.path, run_rel.strip("/"))
            if not tree.is_dir(follow_symlinks=False) or not os.path.isdir(top):
                continue
            found += [d for d, _, _ in os.walk(top, topdown=False)]
    return found


def remove_cgroups(run_rel: str, root: str = "/sys/fs/cgroup") -> None:
    """rmdir what ``leftover_cgroups`` finds (an empty cgroup only; a live one stays)."""
    for directory in leftover_cgroups(run_rel, root):
        with contextlib.suppress(OSError):
            os.rmdir(directory)

"""A rank in an OCI container: the image is what runs, the gang stays ringleader's.

Why: a workload's image is its software environment, the same on every node and
readable by the account that runs it (issue 24).  The agent still starts, watches
and stops every rank; for an image it starts the rank as ``podman run`` (or
``docker run``) in the foreground instead of as a process, so output, exit codes,
signals and the rank's cgroup stay as for a process pod:

- ``--network host --ipc host``: ranks reach each other and the master as
  process ranks do (NCCL and gloo need no port mapping);
- the rank's environment: what ringleader, the framework and the spec set (the
  host's own ``PATH``, ``PYTHONPATH`` and ``LD_LIBRARY_PATH`` stay out: the
  image's are its own), passed by name (``-e NAME``, the value from podman's
  environment) so no value is on a command line;
- ``--user UID:GID`` of the pod's account (none: the image's user);
- ``--cgroup-parent``: the pod's cgroup, so the container (and its conmon) are
  child cgroups of it: its limits hold and a kill of the run's cgroup ends them.
  podman itself stays in the agent's cgroup, not the pod's: cgroup v2 allows no
  process in a cgroup whose children have controllers;
- mounts: the working directory, the agent's run dir (error files) and the
  workload's own directory, each at its own path.  Where the rank runs as an
  account, a tenant names those paths, and a root ``podman`` resolving them
  would follow a tenant's symlink anywhere: so each is opened *as the account*
  (a helper that has dropped to it opens the path and hands the descriptor
  back) and bind-mounted from that descriptor onto a directory of the agent's
  (root's alone); podman mounts that.  What the container sees is what the
  account could open, never more;
- the container's name and labels carry the job and rank, so a stop (and the
  server's sweep) removes every container of the job: ``remove_job``.

Standard library only: the agent imports this module (lazily, for image pods).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from typing import Any

LABEL = "ringleader.job"
#: The host's own software paths: an image brings its own.
HOST_ONLY = frozenset({"PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "PYTHONHOME"})
RUNTIMES = ("podman", "docker")
#: An image reference: [registry[:port]/]path[:tag][@digest], lower-case path parts; a
#: first part is a registry only with a dot, a port or as localhost (Docker's rule).
REFERENCE = re.compile(
    r"^(?:(?:[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)+(?::[0-9]+)?|[a-zA-Z0-9-]+:[0-9]+|localhost)/)?"
    r"[a-z0-9]+(?:[._-]+[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[a-f0-9]{64})?$"
)
#: How long a host's agent waits for a pull before its gang fails (within the
#: supervisor's wait for every agent to be ready, agent_startup.READY_TIMEOUT_S).
PULL_TIMEOUT_S = 45.0
MS_BIND = 4096
MNT_DETACH = 2
#: Run as the account by the helper: open argv[1] (following links with the
#: account's rights), check it may enter it (as a process pod's ``cd`` would), send
#: the descriptor back on fd argv[2].
OPEN_AS = (
    "import os, socket, sys\n"
    "s = socket.socket(fileno=int(sys.argv[2]))\n"
    "fd = os.open(sys.argv[1], os.O_PATH | os.O_DIRECTORY)\n"
    "os.fchdir(fd)\n"  # O_PATH needs no right on the directory itself: entering it does
    "socket.send_fds(s, [b'k'], [fd])\n"
)


def bad_reference(image: str) -> str:
    """Why ``image`` is not an image reference (no option, no shell syntax); "" if it is."""
    if not image:
        return "empty"
    if image.startswith("-"):
        return "it starts with '-' (an option, not an image)"
    if len(image) > 255 or not REFERENCE.match(image):
        return (
            "not [registry/]name[:tag][@sha256:digest] (a lower-case name, no spaces or "
            "shell syntax)"
        )
    return ""


def detect() -> dict[str, str] | None:
    """This host's container runtime: ``{"name", "path", "version"}``, or None.  podman
    first (Debian's, daemonless), then docker; one whose ``version`` fails is none."""
    for name in RUNTIMES:
        path = shutil.which(name)
        if path is None:
            continue
        try:
            done = subprocess.run(
                [path, "version", "--format", "{{.Client.Version}}"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 and done.stdout.strip():
            return {"name": name, "path": path, "version": done.stdout.strip()}
    return None


def detected() -> dict[str, str] | None:
    """``detect()`` once per process (a server asks for every backend it makes)."""
    global _DETECTED
    if _DETECTED is _UNKNOWN:
        _DETECTED = detect()
    return _DETECTED  # type: ignore[return-value]


_UNKNOWN: object = object()
_DETECTED: object = _UNKNOWN


def ready_image(container: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """On this host, before any rank: ``container`` with its runtime's path here, and
    the image pulled as its policy says (``pull``: Always, IfNotPresent (default),
    Never); "" or the reason no rank can start (the registry's own words, a pull that
    took longer than ``PULL_TIMEOUT_S``, no runtime on this host)."""
    name = str(container.get("runtime") or "podman")
    runtime = shutil.which(name)
    image = str(container["image"])
    if runtime is None:
        return container, f"this host has no {name} to run image {image}"
    here = {**container, "runtime": runtime}
    policy = str(container.get("pull") or "IfNotPresent")
    if policy != "Always" and image_present(runtime, image):
        return here, ""
    if policy == "Never":
        return here, f"image {image} is not on this host and its pull policy is Never"
    try:
        done = subprocess.run(
            [runtime, "pull", "--quiet", "--", image],
            capture_output=True,
            text=True,
            timeout=PULL_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return here, f"pulling image {image} did not finish in {PULL_TIMEOUT_S:g} s"
    except OSError as exc:
        return here, f"cannot run {runtime}: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return here, f"cannot pull image {image}: {last.removeprefix('Error: ')}"
    return here, ""


def image_present(runtime: str, image: str) -> bool:
    """The image is in this host's store (``podman image exists``)."""
    try:
        done = subprocess.run(
            [runtime, "image", "exists", "--", image], capture_output=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def container_name(job_id: str, rank: int) -> str:
    safe = re.sub(r"[^a-zA-Z0-9_.-]", "_", job_id)
    return f"{safe}-rank{rank}" if rank >= 0 else f"{safe}-launcher"


def cgroup_parent(join: str) -> str:
    """The pod's cgroup as podman's ``--cgroup-parent`` wants it (from the root of a
    hierarchy) from the join shim's ``cgroup.procs`` files; "" without one."""
    for procs in join.split():
        parts = procs.split("/")
        if len(parts) < 5 or parts[-1] != "cgroup.procs":
            continue
        root = os.environ.get("RINGLEADER_CGROUP_ROOT", "/sys/fs/cgroup").rstrip("/")
        inside = procs[len(root) :] if procs.startswith(root + "/") else ""
        if not inside:
            continue
        v2 = os.path.exists(os.path.join(root, "cgroup.controllers"))
        rest = inside.strip("/").split("/")[(0 if v2 else 1) : -1]
        if rest:
            return "/" + "/".join(rest)
    return ""


def run_argv(
    container: dict[str, object],
    *,
    name: str,
    job_id: str,
    rank: int,
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    account: tuple[int, int] | None,
    mounts: list[tuple[str, str]],
    cgroup: str,
) -> list[str]:
    """``podman run`` of ``argv`` in the image for one rank (pure: golden-tested).
    ``mounts``: (source on the host, path inside); ``cgroup``: ``--cgroup-parent``."""
    runtime = str(container["runtime"])
    out = [runtime, "run", "--rm", "--name", name, "--label", f"{LABEL}={job_id}"]
    out += ["--label", f"ringleader.rank={rank}", "--network", "host", "--ipc", "host"]
    out += ["--pull", "never"]  # ready_image pulled it, as its policy says, before any rank
    if account is not None:
        out += ["--user", f"{account[0]}:{account[1]}"]
    if cgroup:
        out += ["--cgroup-parent", cgroup]
    if container.get("shm_size"):
        out += ["--shm-size", str(container["shm_size"])]
    for source, inside in mounts:
        out += ["--volume", f"{source}:{inside}"]
    out += ["--workdir", cwd]
    for key in sorted(env):
        if key not in HOST_ONLY:
            out += ["--env", key]
    return [*out, "--", str(container["image"]), *argv]


def _joins(argv: list[str]) -> bool:
    """``argv`` starts with the join shim (server/backends/local/cgroups.join_argv)."""
    return len(argv) >= 4 and argv[:2] == ["/bin/sh", "-c"] and argv[3] == "ringleader-join"


def command_of(argv: list[str]) -> list[str]:
    """The rank's own command: ``argv`` without the join shim in front."""
    return argv[4:] if _joins(argv) else argv


# ----- mounts a tenant names, opened as the tenant --------------------------------------
def open_as(path: str, account: tuple[int, int], python: str | None = None) -> int:
    """An ``O_PATH`` descriptor of the directory ``path`` as ``account`` opens it (its
    rights on every component, its view of every link); OSError when it cannot."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        done = subprocess.run(
            [python or sys.executable, "-I", "-S", "-c", OPEN_AS, path, str(theirs.fileno())],
            user=account[0],
            group=account[1],
            extra_groups=[],
            cwd="/",
            env={},
            pass_fds=(theirs.fileno(),),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        theirs.close()
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            raise OSError(f"{path}: {last.split(': ', 1)[-1]}")
        ours.settimeout(5)
        _, fds, _, _ = socket.recv_fds(ours, 1, 1)
        if not fds:
            raise OSError(f"{path}: no descriptor came back")
        return fds[0]
    finally:
        ours.close()
        theirs.close()


def bind(fd: int, target: str) -> None:
    """Bind-mount the directory open at ``fd`` onto ``target`` (the kernel follows the
    descriptor, not a path: nothing can be swapped in between)."""
    libc = ctypes.CDLL(None, use_errno=True)
    source = f"/proc/self/fd/{fd}".encode()
    if libc.mount(source, target.encode(), None, MS_BIND, None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"bind mount onto {target}: {os.strerror(errno)}")


def unbind(target: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(target.encode(), MNT_DETACH)


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


def stage(
    paths: list[str], account: tuple[int, int] | None, stage_dir: str, python: str | None = None
) -> list[tuple[str, str]]:
    """(source, inside) for each of ``paths``: the path itself for a rank without an
    account; else a bind mount (under ``stage_dir``, root's) of what the account opens
    there (``python``: an interpreter the account can run, for the helper).  OSError
    naming the path when the account cannot open one."""
    out: list[tuple[str, str]] = []
    for path in dict.fromkeys(p for p in paths if p):
        if account is None:
            out.append((path, path))
            continue
        fd = open_as(path, account, python)
        try:
            target = os.path.join(stage_dir, f"m{len(out)}")
            os.mkdir(target, 0o700)
            bind(fd, target)
        finally:
            os.close(fd)
        out.append((target, path))
    return out


def unstage(stage_dir: str) -> None:
    """Undo ``stage``: every bind mount under ``stage_dir``, then the directory."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(stage_dir):
            unbind(entry.path)
    shutil.rmtree(stage_dir, ignore_errors=True)


def unstage_all(rundir: str) -> None:
    """``unstage`` every rank's mounts of an agent's run dir (``mounts-*``)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(rundir):
            if entry.name.startswith("mounts-") and entry.is_dir(follow_symlinks=False):
                unstage(entry.path)


def unstage_job(job_id: str, mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """Detach what ``stage`` mounted for ``job_id`` and its agent left (killed before its
    ``close``): mount points under a ``mounts-rank*`` directory of the job's run dir."""
    marker = f"ringleader-{re.sub(r'[^a-zA-Z0-9_.-]', '_', job_id)}-node"
    found: list[str] = []
    with contextlib.suppress(OSError), open(mountinfo) as table:
        for line in table:
            fields = line.split()
            point = fields[4] if len(fields) > 4 else ""
            if marker in point and "/mounts-rank" in point:
                found.append(point.encode().decode("unicode_escape"))
    for point in found:
        unbind(point)
    return found


def remove_job(runtime: str, job_id: str, timeout_s: float = 60) -> list[str]:
    """Force-remove every container of ``job_id`` (stopped or not); their names."""
    try:
        listed = subprocess.run(
            [runtime, "ps", "-a", "--filter", f"label={LABEL}={job_id}", "--format", "json"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        found = json.loads(listed.stdout or "[]") if listed.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []
    ids = [str(c.get("Id") or c.get("ID") or "") for c in found if isinstance(c, dict)]
    ids = [i for i in ids if i]
    if ids:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                [runtime, "rm", "--force", "--time", "0", *ids],
                capture_output=True,
                timeout=timeout_s,
                check=False,
            )
    return ids

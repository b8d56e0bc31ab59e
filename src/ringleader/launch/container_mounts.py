"""Directories a tenant names, mounted into a container as the tenant opened them.

Why: where a rank runs as an account, the tenant names its working directory and
owns its home, and a root ``podman`` resolving such a path would follow a symlink
the tenant planted anywhere (a bind mount skips the directories above it, so a
0644 file in a 0700 directory would become readable).  So each path is opened
*as the account*: a helper that has dropped to it opens the directory and must be
able to enter it (as a process pod's ``cd`` would), then hands the descriptor
back; the agent bind-mounts from that descriptor (the kernel follows the
descriptor, not a path) onto a directory of root's alone, and podman mounts that.
Nothing can be swapped in between.

Host-path volumes (``storage.hostPath``) are opened the same way, and where the
descriptor really is must be under a directory the server allows
(``server/host_paths.py``): a link inside an allowed directory that leads out of
it is refused here, where the path is resolved, not only where it was written.

Standard library only: the agent imports this module (lazily, for image pods).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import subprocess
import sys
from typing import Any

from ringleader.launch.rank_process import run_dir_prefix

MS_BIND = 4096
MS_REMOUNT = 32
MS_RDONLY = 1
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


def remount_read_only(target: str) -> None:
    """Make the bind mount at ``target`` read-only (a bind takes its flags this way)."""
    libc = ctypes.CDLL(None, use_errno=True)
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY
    if libc.mount(None, target.encode(), None, flags, None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"read-only remount of {target}: {os.strerror(errno)}")


def unbind(target: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(target.encode(), MNT_DETACH)


def stage(
    paths: list[str], account: tuple[int, int] | None, stage_dir: str, python: str | None = None
) -> list[tuple[str, str]]:
    """(source, inside) for each of ``paths``: the path itself for a rank without an
    account; else a bind mount (under ``stage_dir``, root's) of what the account opens
    there (``python``: an interpreter the account can run, for the helper).  OSError
    naming the path when the account cannot open one."""
    out: list[tuple[str, str]] = []
    for path in dict.fromkeys(p for p in paths if p):
        if account is None:  # the agent's own user's: made if missing (checkpoints)
            os.makedirs(path, exist_ok=True)
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


def under(path: str, allowed: list[str] | tuple[str, ...]) -> bool:
    """``path`` (absolute, normal) is one of ``allowed`` or inside one."""
    return any(a == "/" or path == a or path.startswith(a.rstrip("/") + "/") for a in allowed)


def open_volume(
    path: str, account: tuple[int, int] | None, python: str | None, allowed: list[str]
) -> int:
    """An ``O_PATH`` descriptor of host path ``path`` as the pod's account opens it (as
    the agent itself without one), checked to really be under ``allowed``; OSError
    saying why not."""
    if account is not None:
        fd = open_as(path, account, python)
    else:
        try:
            fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise OSError(f"{path}: {exc.strerror}") from None
    real = os.readlink(f"/proc/self/fd/{fd}")
    if not under(real, allowed):
        os.close(fd)
        said = ", ".join(allowed) or "none"
        raise OSError(f"{path} is {real}, not under a directory this server lets pods mount "
                      f"(allowed: {said})")  # fmt: skip
    return fd


def stage_volumes(
    volumes: list[list[Any]],
    account: tuple[int, int] | None,
    stage_dir: str,
    python: str | None,
    allowed: list[str],
) -> list[tuple[str, str, str]]:
    """(source, inside, options) for each host-path volume ``[path, inside, read_only]``:
    a bind mount under ``stage_dir`` of what ``open_volume`` opened (the resolved path
    itself where the agent is not root and so cannot bind: it gives no one more than
    its own user's rights then)."""
    out: list[tuple[str, str, str]] = []
    for index, (path, inside, read_only) in enumerate(volumes):
        fd = open_volume(str(path), account, python, allowed)
        try:
            if os.geteuid() != 0:
                real = os.readlink(f"/proc/self/fd/{fd}")
                out.append((real, str(inside), "ro" if read_only else ""))
                continue
            target = os.path.join(stage_dir, f"v{index}")
            os.mkdir(target, 0o700)
            bind(fd, target)
            if read_only:  # read-only here too, not only in the container
                remount_read_only(target)
        finally:
            os.close(fd)
        out.append((target, str(inside), "ro" if read_only else ""))
    return out


def check_volumes(container: dict[str, Any], account: tuple[int, int] | None) -> str:
    """Before any rank: "" when every host-path volume opens as the pod's account and
    is allowed, else why not (the gang fails then, without restarts)."""
    for path, _inside, _read_only in container.get("volumes") or []:
        try:
            fd = open_volume(str(path), account, container.get("python"), container["allowed"])
        except OSError as exc:
            return f"host path volume {exc}"
        os.close(fd)
    return ""


def unstage(stage_dir: str) -> None:
    """Undo ``stage``: every bind mount under ``stage_dir``, then each mount point and
    the directory, never recursively: a mount point still mounted (an unmount that
    failed) stays, rather than root deleting the tenant's files through it."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(stage_dir):
            unbind(entry.path)
            with contextlib.suppress(OSError):
                os.rmdir(entry.path)
    with contextlib.suppress(OSError):
        os.rmdir(stage_dir)


def unstage_all(rundir: str) -> None:
    """``unstage`` every rank's mounts of an agent's run dir (``mounts-*``)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(rundir):
            if entry.name.startswith("mounts-") and entry.is_dir(follow_symlinks=False):
                unstage(entry.path)


def unstage_job(job_id: str, mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """Detach what ``stage`` mounted for ``job_id`` and its agent left (killed before its
    ``close``): mount points under a ``mounts-rank*`` directory of the job's run dir."""
    marker = run_dir_prefix(job_id)
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

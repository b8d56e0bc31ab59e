"""The one way root code reads a file that a tenant (a workload's account) can write.

Why: the agent and the server run as root, and a rank running as its account
owns its error file, its ``.ended`` marker and its metrics directory.  A plain
``open()`` there follows whatever the rank planted: a symbolic link to the
server's ``credentials.json`` or ``/etc/shadow`` (read with root's rights and
echoed back in ``describe``), a FIFO (the reader blocks forever), a hard link to
another tenant's file (this host may run with ``fs.protected_hardlinks=0``), a
1 GiB sparse file (read whole into memory), or a directory swapped for a link
between a check and the open.

How (every step on descriptors, so nothing can be swapped between a check and
a use):

- the walk starts at an *anchor*, a directory owned by root or by us
  (``trusted``) and writable by no one else unless sticky: one the caller made
  (the agent's run dir) or, by default, the deepest such ancestor of the path
  (``trusted_prefix``; a tenant can change nothing at or above it);
- below it every directory is entered with ``openat(O_DIRECTORY|O_NOFOLLOW)``,
  so no link anywhere on the way is followed;
- the file is opened ``O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_NOCTTY|O_CLOEXEC`` and
  ``fstat``-ed: a regular file (no FIFO, device or socket), one name only
  (``st_nlink == 1``: no hard link to someone else's file), owned by us, root or
  its directory's owner;
- at most ``cap`` bytes are read (``read``), or the part after an offset
  (``read_from``, for files that grow: metrics).

Anything else raises ``Refused`` (an ``OSError`` whose text says why) or the
``OSError`` the kernel gave (``FileNotFoundError`` for a missing file).

Invariants: standard library only, ``os`` and ``stat`` (the agent imports this
module and must start fast); nothing here writes.
"""

from __future__ import annotations

import contextlib
import os
import stat

__all__ = [
    "Refused",
    "open_dir",
    "open_file",
    "open_in",
    "read",
    "read_from",
    "read_or_none",
    "trusted",
    "trusted_prefix",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | _CLOEXEC
_CHUNK = 1 << 20


class Refused(OSError):
    """The path is not a plain file of its own, reachable without a link: not read."""


def _owners() -> tuple[int, int]:
    return (0, os.geteuid())


def trusted(info: os.stat_result) -> bool:
    """A directory only root or we can change: owned by one of us, writable by no one
    else (or sticky, like /tmp: there no one can rename or remove another's entry)."""
    if not stat.S_ISDIR(info.st_mode) or info.st_uid not in _owners():
        return False
    return not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or bool(info.st_mode & stat.S_ISVTX)


def trusted_prefix(path: str) -> str:
    """The deepest ancestor directory of ``path`` that, like every directory above it,
    is ``trusted``: no tenant can redirect a walk that starts there."""
    return _trusted_walk(path)[0]


def _trusted_walk(path: str) -> tuple[str, list[str]]:
    """``trusted_prefix`` and the components of ``path`` below it.  A link on the way
    is followed only where only root or we could have made it (ours, in a trusted
    directory: /var -> /private/var) and only to a directory as trusted as the way
    there; any other link ends the prefix (the walk below it refuses it)."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)[1:]
    prefix = os.sep
    for i, name in enumerate(parts[:-1]):
        step = os.path.join(prefix, name)
        try:
            info = os.lstat(step)
        except OSError:
            return prefix, parts[i:]
        if stat.S_ISLNK(info.st_mode) and info.st_uid in _owners():
            real = os.path.realpath(step)
            if real == os.sep or _trusted_walk(os.path.join(real, "x"))[0] != real:
                return prefix, parts[i:]
            prefix = real
        elif trusted(info):
            prefix = step
        else:
            return prefix, parts[i:]
    return prefix, parts[-1:]


def _below(anchor: str, path: str) -> list[str]:
    """The components of ``path`` under ``anchor``; Refused when it is not under it."""
    anchor = os.path.normpath(os.path.abspath(anchor))
    path = os.path.normpath(os.path.abspath(path))
    rel = os.path.relpath(path, anchor)
    parts = rel.split(os.sep)
    if rel == os.curdir or os.pardir in parts:
        raise Refused(f"{path} is not a file under {anchor}")
    return parts


def _open_anchor(anchor: str) -> int:
    fd = os.open(anchor, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    if not trusted(os.fstat(fd)):
        os.close(fd)
        raise Refused(f"{anchor} is not a directory only root or this process can change")
    return fd


def open_dir(path: str, anchor: str | None = None) -> int:
    """A descriptor of the directory ``path``, walked from ``anchor`` (default:
    ``trusted_prefix(path)``) with no link followed; the caller closes it.  What is
    opened through it later (``open_in``) is in this directory, whatever is renamed
    or swapped at ``path`` meanwhile."""
    if anchor is None:
        anchor, parts = _trusted_walk(os.path.join(path, "x"))
        parts = parts[:-1]
    else:
        parts = [] if _same(anchor, path) else _below(anchor, path)
    dir_fd = _open_anchor(anchor)
    for name in parts:
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            os.close(dir_fd)
            raise _why(exc, path, name) from None
        os.close(dir_fd)
        dir_fd = fd
    return dir_fd


def open_in(dir_fd: int, name: str) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``name`` in the directory ``dir_fd``
    and its ``fstat``, checked as the module says; the caller closes it."""
    if not name or os.sep in name or name in (os.curdir, os.pardir):
        raise Refused(f"{name!r} is not a file name")
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _why(exc, name, name) from None
    info = os.fstat(fd)
    problem = _problem(info, os.fstat(dir_fd))
    if problem:
        os.close(fd)
        raise Refused(f"{name}: {problem}")
    return fd, info


def open_file(path: str, anchor: str | None = None) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``path`` and its ``fstat``, walked
    from ``anchor`` (default: ``trusted_prefix(path)``) as the module says; the caller
    closes it.  Raises ``Refused`` or the kernel's ``OSError``."""
    if anchor is not None:
        _below(anchor, path)  # refuses what is not under the anchor before anything opens
    dir_fd = open_dir(os.path.dirname(os.path.abspath(path)), anchor)
    try:
        try:
            return open_in(dir_fd, os.path.basename(path))
        except Refused as exc:
            raise Refused(f"{path}: {exc}") from None
    finally:
        os.close(dir_fd)


def _same(a: str, b: str) -> bool:
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))


def _why(exc: OSError, path: str, name: str) -> OSError:
    """ELOOP/ENOTDIR from O_NOFOLLOW mean a link (or a non-directory) on the way."""
    import errno

    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return Refused(f"{path}: {name} is a symbolic link or not a directory")
    return exc


def _problem(info: os.stat_result, folder: os.stat_result) -> str:
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file (a FIFO, device, socket or directory)"
    if info.st_nlink != 1:
        return f"has {info.st_nlink} names (a hard link)"
    # In a tenant's directory only the tenant's own files: a root-owned file there
    # with one name is a hard link to root's file whose other name went (where
    # fs.protected_hardlinks is off, a tenant may link /etc/shadow before a rename).
    owners = (*_owners(), folder.st_uid) if folder.st_uid in _owners() else (folder.st_uid,)
    if info.st_uid not in owners:
        return f"owned by uid {info.st_uid}, not by its directory's owner"
    return ""


def read_from(fd: int, offset: int, cap: int) -> bytes:
    """At most ``cap`` bytes of ``fd`` from ``offset`` (``pread``: the offset is not moved)."""
    chunks: list[bytes] = []
    left = cap
    while left > 0:
        chunk = os.pread(fd, min(left, _CHUNK), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read(path: str, cap: int, anchor: str | None = None) -> bytes:
    """At most ``cap`` bytes of ``path``, opened by ``open_file``; raises as it does."""
    fd, _ = open_file(path, anchor)
    try:
        return read_from(fd, 0, cap)
    finally:
        os.close(fd)


def read_or_none(path: str, cap: int, anchor: str | None = None) -> bytes | None:
    """``read``, or None when the file is missing or refused (for callers that only
    want the data: a rank's own file that is not there is no error)."""
    with contextlib.suppress(OSError):
        return read(path, cap, anchor)
    return None

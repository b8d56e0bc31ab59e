"""Where root writes test hosts' files: only where no other user can change them.

Why: root writes keys, ``authorized_keys``, sshd configs and ``mounts.sh`` (which
root's ``/bin/sh`` runs) and reads ``state.json`` back (whose pids ``down``
signals). A user who could rename, replace or write into a directory on that path
could swap any of them and run code as root, so:

* every directory root writes into is created *exclusively* (mode 0700); one that
  exists already is used only when it is provably a leftover of ours (a real
  directory, root's, mode 0700), and then emptied first;
* every existing directory on the path is root's and writable by nobody else,
  except a sticky one (``/tmp``): there only the owner of an entry may rename or
  remove it, and root's entries are made exclusively, as above;
* a state file is read without following a link, only when it is a regular file,
  and no more than ``MAX_STATE_BYTES`` of it.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

MAX_STATE_BYTES = 256 * 1024  # 32 hosts take about 8 KiB


def changeable_by_others(path: Path) -> tuple[Path, str] | None:
    """The first directory on ``path`` (absolute, links already resolved) that a user
    other than root could change, with why; None when only root can change any.

    Components that do not exist yet are not judged: root makes them, exclusively,
    below the last one that does. ``path`` itself may not be sticky.
    """
    chain = [Path(path.anchor), *(Path(path.anchor, *path.parts[1 : i + 1])
                                  for i in range(len(path.parts) - 1))]  # fmt: skip
    for current in chain:
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return current.parent, "is not a directory"
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            return current, "is a symbolic link (it was replaced while checked)"
        if not stat.S_ISDIR(mode):
            return current, "is not a directory"
        if st.st_uid != 0:
            return current, f"is owned by uid {st.st_uid}, not root"
        sticky = mode & stat.S_ISVTX and current != path
        if mode & 0o022 and not sticky:
            return current, f"is writable by users other than root (mode {mode & 0o7777:o})"
    return None


def is_ours(path: Path) -> bool:
    """Whether ``path`` is a directory root made for test hosts: a real directory
    (not a link), owned by root, mode 0700."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and st.st_mode & 0o7777 == 0o700


def make_private_dir(path: Path, *, leftover_ok: bool = False) -> None:
    """Create ``path`` exclusively, mode 0700 (its parent must exist).

    With ``leftover_ok``, a directory already there that ``is_ours`` is removed
    first (a dead run's); anything else there raises ``FileExistsError``.
    """
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not (leftover_ok and is_ours(path)):
            raise FileExistsError(errno.EEXIST, _not_ours(path), str(path)) from None
        shutil.rmtree(path)  # follows no links (fd-based), then made anew
        os.mkdir(path, 0o700)
    os.chmod(path, 0o700)  # whatever the umask; the parent is root's alone


def _not_ours(path: Path) -> str:
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"exists but cannot be examined ({exc.strerror})"
    kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "there"
    return (
        f"is {kind}, owned by uid {st.st_uid}, mode {st.st_mode & 0o7777:o}: not a"
        " directory test hosts made (root's, 0700), so nothing is written in it"
    )


def read_capped(path: Path, limit: int = MAX_STATE_BYTES) -> bytes:
    """The bytes of the regular file ``path``, opened without following a link and
    without waiting (a FIFO); ``ValueError`` when it is not a regular file or is
    larger than ``limit``. ``FileNotFoundError``, ``PermissionError`` and ELOOP (a
    link) come as the ``OSError`` they are."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("it is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"it is larger than {limit} bytes")
    return data

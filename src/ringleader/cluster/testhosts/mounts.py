"""Mount-namespace scripts that make one test host differ from the others.

Why: the hosts share this machine's filesystem, which makes "the same path on every
host" hold for free; a test (or a user trying ``ringleader doctor``) sometimes needs
one host to lack a directory, or to keep its own podman storage, as separate
machines would. Each script runs in the host's private mount namespace just before
its sshd is exec'd, so only the sessions of that host see the difference.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path

#: What ``_hide_script``'s lines run (copied first: they may live where it hides).
HIDE_TOOLS = ("mkdir", "touch", "ln", "rm", "rmdir", "mount")
#: podman's root storage and run state: what a host with ``own_containers`` has of its own.
CONTAINER_DIRS = ("/var/lib/containers", "/run/containers", "/run/libpod")


def own_containers_script(host_dir: Path) -> list[str]:
    """Shell lines that give the current (private) mount ns its own podman storage, and
    the machine's cgroup mounts back (``ip netns exec`` mounts a fresh /sys without
    them, and runc needs them to create a container)."""
    lines = cgroup_mounts_script()
    for path in CONTAINER_DIRS:
        own = shlex.quote(str(host_dir / "containers" / path.lstrip("/")))
        lines += [f"mkdir -p {own} {path}", f"mount --bind {own} {path}"]
    return lines


def cgroup_mounts_script() -> list[str]:
    """Shell lines that mount this machine's cgroup hierarchies (as its mountinfo
    lists them under /sys/fs/cgroup) again at the same places: mounting a hierarchy
    with its options attaches the existing one (a bind from another mount namespace
    is refused)."""
    lines = []
    for row in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = row.partition(" - ")
        point = fields.split()[4]
        fstype, _source, options = tail.split()[:3]
        if point != "/sys/fs/cgroup" and not point.startswith("/sys/fs/cgroup/"):
            continue
        q = shlex.quote
        lines.append(f"mkdir -p {q(point)}")
        lines.append(f"mount -t {q(fstype)} -o {q(options)} {q(fstype)} {q(point)}")
    return lines


def hide_script(hidden: Sequence[str], protected: Sequence[Path], tools: Path) -> list[str]:
    """Shell lines that make each hidden path vanish in the current (private) mount ns.

    The parent's original entries are reached through fd 3 opened before the tmpfs covers
    it; ``mount --no-canonicalize`` is essential, otherwise mount(8) resolves
    ``/proc/self/fd/3/x`` to the now-covered path and binds the empty tmpfs onto itself.
    The tools the lines run are copies in ``tools``: hiding an entry of /usr/bin covers
    the tools' own directory until each entry is bound back.
    """
    hide: dict[Path, set[str]] = {}
    seen: list[Path] = []
    for raw in sorted(hidden, key=lambda p: len(Path(p).parts)):
        path = Path(os.path.realpath(Path(raw).parent)) / Path(raw).name
        if any(path.is_relative_to(s) for s in seen):
            continue  # already gone together with an ancestor
        if path.parent == Path("/") or not path.parent.is_dir():
            raise ValueError(f"cannot hide {raw!r}: its parent must be an existing non-root dir")
        if any(Path(os.path.realpath(p)).is_relative_to(path) for p in protected):
            raise ValueError(f"cannot hide {raw!r}: sshd needs what is under it")
        seen.append(path)
        hide.setdefault(path.parent, set()).add(path.name)
    if not hide:
        return []
    q = shlex.quote
    found = {name: shutil.which(name) for name in HIDE_TOOLS}
    lines = [f"mkdir -p {q(str(tools))}"]
    lines += [f"cp {q(str(path))} {q(str(tools / name))}" for name, path in found.items()]
    # Reached through fd 4 (as the parent through fd 3): ``tools`` may be covered too.
    lines.append(f"exec 4< {q(str(tools))}")
    mkdir, touch, ln, rm, rmdir, mount = (f"/proc/self/fd/4/{name}" for name in HIDE_TOOLS)
    for parent in sorted(hide, key=lambda p: len(p.parts)):
        st = parent.stat()
        lines += [
            f"exec 3< {q(str(parent))}",
            f"{mount} -t tmpfs -o mode={st.st_mode & 0o7777:o},uid={st.st_uid},gid={st.st_gid}"
            f" rlt-hidden {q(str(parent))}",
        ]
        for entry in sorted(os.scandir(parent), key=lambda e: e.name):
            if entry.name in hide[parent]:
                continue
            dst, src = q(entry.path), q(f"/proc/self/fd/3/{entry.name}")
            if entry.is_symlink():
                lines.append(f"{ln} -s {q(os.readlink(entry.path))} {dst}")
            else:
                # An entry may vanish before the script runs (/tmp is busy): then drop it.
                make, undo = (mkdir, rmdir) if entry.is_dir() else (touch, rm)
                bind = f"{mount} --no-canonicalize --rbind {src} {dst}"
                lines.append(f"{make} {dst} && {{ {bind} 2>/dev/null || {undo} {dst}; }}")
        lines.append("exec 3<&-")
    return [*lines, "exec 4<&-"]

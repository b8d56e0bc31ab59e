"""A pod's private view of the machine: its own /tmp and a /proc without other accounts.

Why: pods of different tenants share one host.  Without this, a rank lists
``/tmp`` (other pods' files and run directories, named by workload id) and
``/proc`` (every command line, and the cgroup path that names a workload).
Containers would bring namespaces; this holds without them.

How: when a root agent starts a process for an account (a rank, mpirun, an
interactive pod's keepalive), it runs this file first, as root, with a clean
environment (never the rank's: its ``LD_PRELOAD`` must not reach a root
process).  The real request (argv, environment, directory, account) comes in a
memfd, not on the command line.  This process then:

1. ``unshare(CLONE_NEWNS)``: a mount namespace of its own, with ``/`` made a
   recursive slave (the host's later mounts still reach it, ours never leave);
2. mounts a fresh tmpfs on ``/tmp`` (1777, nosuid, nodev), and binds back the
   directories the agent keeps for the pod (its run dir: error files, the MPI
   hostfile) at the same path, opened before the tmpfs hid them;
3. mounts a fresh procfs on ``/proc`` with ``hidepid=invisible`` (Linux 5.8+;
   ``hidepid=2`` before): other accounts' processes are not listed, and their
   command lines, environments and cgroups cannot be read;
4. drops to the account (no supplementary groups), enters the working
   directory and ``exec``s the command: the same pid, so cgroup joining, pinning
   and signals behave as before.

Everything the pod starts inherits the namespace; it ends with its last
process, and its tmpfs with it (nothing to clean, nothing root must read).
``/dev/shm`` stays the host's, so ranks of one workload in different pods still
meet there (NCCL, gloo, MPI's shared memory).  Where a step is refused (a
container without ``CAP_SYS_ADMIN``, a seccomp filter), the process still
runs: ``TMPDIR`` becomes a private directory in the agent's run dir, and one
line on its stderr says what was not possible.

Entering (``exec``/``bash`` sessions): ``popen_args(enter_fd=view_of(PID))``,
with PID the pod's process (found by its cgroup), makes the session ``setns``
into the pod's view before it drops to the account.

Invariants: standard library only, and this file runs as a script (``-I -S``),
importing nothing of ringleader; root never follows a tenant's path here (the
kept directories are the agent's own, opened ``O_NOFOLLOW``; every mount point
is in the fresh tmpfs or a fixed system path).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_BIND, MS_REC, MS_SLAVE = 0x1000, 0x4000, 0x80000
TMP = "/tmp"
PROC = "/proc"
#: What mounts the private procfs; the older spelling for kernels before 5.8.
HIDEPID = ("hidepid=invisible", "hidepid=2")
CANNOT_START = 127
NOTE = "ringleader: "
#: What the wrapper itself gets (never the rank's variables): enough to start Python.
WRAPPER_ENV = ("PATH", "LD_LIBRARY_PATH")


# ----- the agent's side ------------------------------------------------------------------
def applies(account: tuple[int, int] | None) -> bool:
    """Whether processes for ``account`` start in a private view: only a root agent
    can make one, and only a process for another account needs one."""
    return account is not None and os.geteuid() == 0


@contextlib.contextmanager
def popen_args(
    argv: Sequence[str],
    cwd: str,
    env: dict[str, str],
    account: tuple[int, int] | None,
    *,
    keep: Sequence[str] = (),
    enter_fd: int | None = None,
    join: Sequence[str] = (),
) -> Iterator[dict[str, Any]]:
    """``subprocess.Popen`` keyword arguments (``args`` included) that run ``argv`` in
    ``cwd`` with ``env`` as ``account`` in a private view; the process must be started
    inside the ``with`` (the request's memfd is closed after it).

    ``keep``: directories of the caller's that stay at their path inside (the agent's
    run dir); ``enter_fd``: instead of a new view, the one of this open
    ``/proc/PID/ns/mnt`` (an exec session into a pod); ``join``: ``cgroup.procs``
    files the wrapper moves itself into while still root (an exec session joins its
    pod's cgroup: on cgroup v2 a move from the server's cgroup needs rights on their
    common ancestor, which the account has not).  Where ``applies`` is false,
    the plain arguments: ``argv`` dropped to ``account`` by Popen itself.
    """
    if not applies(account):
        from ringleader.launch.rank_process import as_account

        yield {"args": list(argv), "cwd": cwd, "env": env, **as_account(account)}
        return
    assert account is not None
    request = {
        "argv": list(argv),
        "cwd": cwd,
        "env": env,
        "uid": account[0],
        "gid": account[1],
        "keep": [os.path.abspath(k) for k in keep],
        "enter_fd": enter_fd,
        "join": list(join),
    }
    fd = os.memfd_create("ringleader-podns")
    try:
        os.write(fd, json.dumps(request).encode())
        os.lseek(fd, 0, os.SEEK_SET)
        fds = (fd,) if enter_fd is None else (fd, enter_fd)
        yield {
            "args": [sys.executable, "-I", "-S", os.path.abspath(__file__), str(fd)],
            "cwd": "/",
            "env": {k: os.environ[k] for k in WRAPPER_ENV if k in os.environ},
            "pass_fds": fds,
        }
    finally:
        os.close(fd)


PR_SET_NO_NEW_PRIVS = 38
#: ioctl on a namespace's fd: an fd of the user namespace that owns it (linux/nsfs.h).
NS_GET_USERNS = 0xB701


def view_of(pid: int) -> int:
    """An open handle on the view of the process ``pid`` (its ``/proc/PID/ns/mnt``),
    for ``popen_args(enter_fd=...)``.  Open it, then check that ``pid`` is still the
    pod's (its cgroup): the handle stays on that view even if the pid is reused.

    Refused (PermissionError) when a user namespace other than ours owns it: a rank
    can make a mount namespace of its own (``unshare -Urm``) and mount its files over
    /etc there; root entering it would run setuid programs against them."""
    fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    try:
        import fcntl

        owner = fcntl.ioctl(fd, NS_GET_USERNS)
        try:
            theirs, ours = os.fstat(owner), os.stat("/proc/self/ns/user")
        finally:
            os.close(owner)
        if (theirs.st_dev, theirs.st_ino) != (ours.st_dev, ours.st_ino):
            raise PermissionError(
                f"the pod's process {pid} runs in a mount namespace of its own making"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


# ----- the wrapper's side (root, until it drops) -------------------------------------------
def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        import ctypes

        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(libc: Any, source: str, target: str, fstype: str | None, flags: int, data: str) -> None:
    def c(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    _check(libc.mount(c(source), c(target), c(fstype), flags, c(data or None)), f"mount {target}")


def enter(libc: Any, ns_fd: int) -> None:
    """Join the mount namespace of ``ns_fd`` (an open ``/proc/PID/ns/mnt``); root only.
    The kernel moves the caller's root and working directory to the namespace's."""
    _check(libc.setns(ns_fd, CLONE_NEWNS), "setns")


def join_cgroup(procs: str) -> None:
    """Move this process into the cgroup of ``procs`` (its ``cgroup.procs``), as root:
    the file is the kernel's, in a directory root made; never through a link."""
    fd = os.open(procs, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.write(fd, str(os.getpid()).encode())
    finally:
        os.close(fd)


def _under(path: str, top: str) -> bool:
    """Whether ``path`` is ``top`` or below it, ``..`` resolved first (as text)."""
    path = os.path.normpath(path)
    return path == top or path.startswith(top.rstrip("/") + "/")


def _open_as(path: str, uid: int, gid: int) -> int | None:
    """``path`` opened (``O_PATH``) with the account's rights alone, or None: a
    tenant's path is never resolved with root's."""
    os.setegid(gid)
    os.seteuid(uid)
    try:
        return os.open(path, os.O_PATH | os.O_DIRECTORY)
    except OSError:
        return None
    finally:
        os.seteuid(0)
        os.setegid(0)


def private_view(libc: Any, keep: Sequence[str], cwd: str, uid: int, gid: int) -> list[str]:
    """A new mount namespace with a private /tmp and a hidepid /proc; what could not
    be made, as notes (an empty list: all of it).  Raises only when no namespace
    could be made at all (then nothing changed).  ``keep``: the agent's directories
    to bind back (root's own); ``cwd``: the command's directory, bound back too when
    it is in /tmp, as the account resolves it."""
    cwd = os.path.normpath(cwd)  # "/tmp/../etc" is /etc: never a mount target here
    _check(libc.unshare(CLONE_NEWNS), "unshare")
    _mount(libc, "none", "/", None, MS_REC | MS_SLAVE, "")
    notes: list[str] = []
    kept: list[tuple[str, int]] = []
    for path in keep:
        if _under(path, TMP):
            kept.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)))
    if _under(cwd, TMP) and cwd != TMP and not any(_under(cwd, k) for k in keep):
        fd = _open_as(cwd, uid, gid)
        if fd is not None:
            kept.append((os.path.normpath(cwd), fd))
    try:
        _mount(libc, "tmpfs", TMP, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        for path, fd in kept:
            os.makedirs(path, mode=0o755, exist_ok=True)  # in the fresh tmpfs: ours alone
            _mount(libc, f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, "")
    except OSError as exc:
        notes.append(f"/tmp is the host's ({exc.strerror})")
    finally:
        for _, fd in kept:
            os.close(fd)
    for option in HIDEPID:
        try:
            _mount(libc, "proc", PROC, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, option)
            break
        except OSError as exc:
            failed = exc.strerror
    else:
        notes.append(f"/proc shows every account's processes ({failed})")
    return notes


def private_tmpdir(base: str, uid: int, gid: int) -> str:
    """The fallback: a fresh 0700 directory of the account's in ``base`` (the agent's
    run dir, root's: the account cannot rename it), removed with it."""
    path = os.path.join(base, "tmp-" + os.urandom(8).hex())
    os.mkdir(path, 0o700)
    os.chown(path, uid, gid)
    return path


def _run(request: dict[str, Any]) -> int:
    argv: list[str] = request["argv"]
    env: dict[str, str] = request["env"]
    uid, gid = int(request["uid"]), int(request["gid"])
    if uid == 0 or gid == 0:
        print(f"{NOTE}refusing to run {argv[0]!r} as root", file=sys.stderr)
        return CANNOT_START
    import warnings  # noqa: F401 (os.execvpe imports it: the account may not read this stdlib)

    os.setgroups([])  # root's groups never count, not even while opening as the account
    libc = _libc()
    notes: list[str] = []
    for procs in request.get("join") or ():
        try:
            join_cgroup(procs)
        except OSError as exc:
            print(f"{NOTE}cannot join the pod's cgroup: {exc.strerror}", file=sys.stderr)
            return CANNOT_START
    if request.get("enter_fd") is not None:
        try:
            enter(libc, int(request["enter_fd"]))
        except OSError as exc:
            print(f"{NOTE}cannot enter the pod's view: {exc.strerror}", file=sys.stderr)
            return CANNOT_START
        os.close(int(request["enter_fd"]))
        # A session gains no privilege by exec (setuid, file capabilities), whatever
        # it finds in the pod's view.
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
    else:
        try:
            notes = private_view(libc, request.get("keep") or [], request["cwd"], uid, gid)
        except OSError as exc:
            notes = [f"no private mount namespace ({exc.strerror}): /tmp and /proc are the host's"]
        shared_tmp = any(n.startswith(("/tmp", "no private")) for n in notes)
        # TMPDIR unset or /tmp (the plan's): a private one instead; a spec's own stands.
        if shared_tmp and request.get("keep") and env.get("TMPDIR", TMP) == TMP:
            env["TMPDIR"] = private_tmpdir(request["keep"][0], uid, gid)
            notes.append(f"TMPDIR is {env['TMPDIR']}")
    for note in notes:
        print(f"{NOTE}{note}", file=sys.stderr, flush=True)
    os.setgid(gid)
    os.setuid(uid)
    try:
        os.chdir(request["cwd"])
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        print(f"cannot start {argv[0]!r}: {exc.strerror}", file=sys.stderr, flush=True)
    return CANNOT_START


def main(args: list[str]) -> int:
    """``podns.py FD``: the request in the memfd ``FD`` (see ``popen_args``)."""
    if len(args) != 1 or not args[0].isdigit() or os.geteuid() != 0:
        print("usage (root, from the agent): podns.py FD", file=sys.stderr)
        return 2
    with os.fdopen(int(args[0]), "rb") as request:  # closed before the command runs
        loaded = json.load(request)
    return _run(loaded)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

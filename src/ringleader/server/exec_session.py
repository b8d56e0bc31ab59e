"""One ``exec``/``bash`` session: a process in a pod, its bytes over a WebSocket.

The wire protocol follows Kubernetes' ``channel.k8s.io`` exec: every binary
message starts with a channel byte.

- 0 stdin (client -> server); an empty payload means end of input;
- 1 stdout, 2 stderr (server -> client; with a TTY everything comes on 1);
- 3 status (server -> client, JSON, last message): ``{"exitCode": N}`` or
  ``{"error": "...", "code": 404|409|...}`` when nothing could be started;
- 4 resize (client -> server, JSON ``{"rows": R, "cols": C}``; TTY only).
  R and C are integers 1..MAX_WINDOW; a resize frame that is anything else
  (not JSON, not an object, wrong types, out of range, over RESIZE_BYTES)
  is ignored (the first one of a session logged): the session goes on at
  its last good size.

Any other failure while relaying ends the session with a status message
(``{"error": ..., "code": 500}``), never with a silent close.

Invariants: the process runs in its own session (with the pty as its
controlling terminal when there is one) and carries the pod's environment,
job id included, so deleting the workload sweeps it too; when the client goes
away first, its whole process group is stopped (SIGTERM, grace, SIGKILL), and in
a container (``podman exec``, whose process there is conmon's, not the client's)
what carries the session's marker in the container's pid namespace is killed
(``end_marked``), so a dropped connection leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import pty
import shlex
import signal
import stat
import struct
import subprocess
import termios
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from ringleader.launch import podns
from ringleader.launch.procs import start_ticks, terminate
from ringleader.server.backends.base import ExecTarget

STDIN, STDOUT, STDERR, STATUS, RESIZE = 0, 1, 2, 3, 4
#: Enters the session's directory as its account (else its home), then runs the rest:
#: the directory is the pod's process's, a path its tenant can change, so it is never
#: resolved with the server's rights (Popen's ``cwd`` is entered before the uid drops).
ENTER_SHIM = 'cd -P -- "$1" 2>/dev/null || cd 2>/dev/null; shift; exec "$@"'
STOP_GRACE_S = 2.0
MAX_WINDOW = 10_000  # rows or columns; TIOCSWINSZ takes 16 bits, no terminal is that big
RESIZE_BYTES = 256  # a resize frame's JSON is a few dozen bytes
log = logging.getLogger(__name__)
Send = Callable[[bytes], Awaitable[None]]
Receive = Callable[[], Awaitable[bytes | None]]  # None: the client went away


def frame(channel: int, payload: bytes = b"") -> bytes:
    return bytes([channel]) + payload


def status_frame(**body: object) -> bytes:
    return frame(STATUS, json.dumps(body).encode())


def _take_terminal() -> None:  # runs in the child, after setsid
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@contextlib.contextmanager
def _in_view(view: tuple[int, int]) -> Iterator[int]:
    """An open handle on the view (mount namespace) of the pod's process ``view`` =
    (pid, start ticks), checked to still be that process after opening: a pid reused
    since the target was found is refused, never entered."""
    pid, started = view
    fd = podns.view_of(pid)
    try:
        if start_ticks(pid) != started:
            raise ProcessLookupError(f"the pod's process {pid} has ended")
        yield fd
    finally:
        os.close(fd)


def set_window(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def parse_resize(payload: bytes) -> tuple[int, int] | str:
    """``(rows, cols)`` from a resize frame, or what is wrong with it."""
    if len(payload) > RESIZE_BYTES:
        return f"a resize message of {len(payload)} bytes (at most {RESIZE_BYTES})"
    try:
        size = json.loads(payload)
    except ValueError:  # not UTF-8, not JSON
        return f"a resize message that is not JSON: {payload[:60]!r}"
    if not isinstance(size, dict):
        return f"a resize message that is not an object: {payload[:60]!r}"
    values = []
    for key in ("rows", "cols"):
        value = size.get(key)
        if type(value) is not int or not 1 <= value <= MAX_WINDOW:  # bool is no size
            return f"a resize message whose {key!r} is {value!r} (an integer 1..{MAX_WINDOW})"
        values.append(value)
    return values[0], values[1]


class ExecSession:
    """Runs ``argv`` at ``target`` and relays it until it exits or the client leaves."""

    def __init__(
        self, target: ExecTarget, argv: list[str], tty: bool, rcfile: str | None = None
    ) -> None:
        """``rcfile``: the bash rc file named in ``argv`` (services.exec.shell_argv), a
        file of the server's /tmp; a session entering its pod's view reads it through
        an inherited descriptor, since that /tmp is the pod's own there."""
        self.target, self.argv, self.tty, self.rcfile = target, argv, tty, rcfile
        self.proc: subprocess.Popen[bytes] | None = None
        self._pty: int | None = None
        self.bad_resizes = 0  # resize frames ignored as malformed

    def start(self) -> None:
        """Spawn the process; OSError (no such command, bad directory) propagates."""
        prefix = self.target.prefix
        if self.tty and self.target.tty_prefix is not None:
            prefix = self.target.tty_prefix
        argv = [*prefix, *self.argv]
        if self.target.remote:  # on the pod's SSH node: one quoted command, a tty asked
            *ssh, host = self.target.remote
            argv = [*ssh, *(["-t", "-t"] if self.tty else []), host, shlex.join(argv)]
        common: dict[str, Any] = {
            "cwd": self.target.cwd,
            "env": self.target.env,
            "start_new_session": True,
        }
        if self.target.run_as is not None:  # the pod's account, as its ranks (never root)
            account = self.target.run_as
            enter = ["/bin/sh", "-c", ENTER_SHIM, "ringleader-cd", self.target.cwd]
            view = self.target.view
            if view is not None and podns.applies((account.uid, account.gid)):
                self._spawn_in_view(view, [*enter, *argv], (account.uid, account.gid))
                return
            common |= {"user": account.uid, "group": account.gid, "extra_groups": []}
            argv = [*enter, *argv]
            common["cwd"] = "/"
        self._spawn(argv, common)

    def _spawn_in_view(self, view: tuple[int, int], argv: list[str], ids: tuple[int, int]) -> None:
        """As the account inside the pod's view (its /tmp and /proc), through podns."""
        with contextlib.ExitStack() as held:
            keep: tuple[int, ...] = ()
            if self.rcfile is not None and self.rcfile in argv:
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                rc = os.open(self.rcfile, flags)  # the server's file, now the account's
                held.callback(os.close, rc)
                if not stat.S_ISREG(os.fstat(rc).st_mode):
                    raise PermissionError(f"{self.rcfile} is no longer the session's rc file")
                argv = [f"/dev/fd/{rc}" if word == self.rcfile else word for word in argv]
                keep = (rc,)
            fd = held.enter_context(_in_view(view))
            env, join = self.target.env, self.target.join
            args = held.enter_context(podns.popen_args(argv, "/", env, ids, enter_fd=fd, join=join))
            pass_fds = (*args.pop("pass_fds"), *keep)
            self._spawn(args.pop("args"), {**args, "pass_fds": pass_fds, "start_new_session": True})

    def _spawn(self, argv: list[str], common: dict[str, Any]) -> None:
        if self.tty:
            parent, child = pty.openpty()
            try:
                self.proc = subprocess.Popen(
                    argv,
                    stdin=child,
                    stdout=child,
                    stderr=child,
                    preexec_fn=_take_terminal,  # after setsid: the pty becomes its terminal
                    **common,
                )
            except OSError:
                os.close(parent)
                raise
            finally:
                os.close(child)
            self._pty = parent
        else:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                **common,
            )

    async def relay(self, send: Send, receive: Receive) -> int | None:
        """Pump bytes both ways; the exit code, or None when the session ended first.

        None: the client left, or relaying failed (then an error status was sent).
        """
        assert self.proc is not None
        loop = asyncio.get_running_loop()
        outgoing: asyncio.Queue[bytes | None] = asyncio.Queue()
        sources = (
            [(self._pty, STDOUT)]
            if self._pty is not None
            else [(self.proc.stdout.fileno(), STDOUT), (self.proc.stderr.fileno(), STDERR)]  # type: ignore[union-attr]
        )
        for fd, channel in sources:
            threading.Thread(target=_pump, args=(fd, channel, loop, outgoing), daemon=True).start()
        client_left = asyncio.create_task(self._feed(receive))
        open_streams = len(sources)
        try:
            while open_streams:
                out_task = asyncio.create_task(outgoing.get())
                await asyncio.wait({out_task, client_left}, return_when=asyncio.FIRST_COMPLETED)
                if not out_task.done():
                    out_task.cancel()
                    broke = client_left.exception()
                    if broke is not None:  # not the client leaving: say so, then end
                        log.error("exec session failed", exc_info=broke)
                        status = status_frame(error=f"the exec session failed: {broke}", code=500)
                        with contextlib.suppress(Exception):  # the socket may be gone too
                            await send(status)
                    return None
                item = out_task.result()
                if item is None:
                    open_streams -= 1
                else:
                    await send(item)
            return await loop.run_in_executor(None, self.proc.wait)
        finally:
            client_left.cancel()

    async def _feed(self, receive: Receive) -> None:
        """Client -> process; returns only when the client leaves."""
        assert self.proc is not None
        while True:
            message = await receive()
            if message is None:
                return
            if not message:
                continue
            channel, payload = message[0], message[1:]
            if channel == RESIZE and self._pty is not None:
                size = parse_resize(payload)
                if isinstance(size, str):
                    self.bad_resizes += 1
                    if self.bad_resizes == 1:  # once: a client sending many must not flood the log
                        log.warning("exec session: ignored %s (and any more of them)", size)
                    continue
                with contextlib.suppress(OSError):  # the pty just closed: the relay ends anyway
                    set_window(self._pty, *size)
            elif channel == STDIN and payload:
                await asyncio.get_running_loop().run_in_executor(None, self._write, payload)
            elif channel == STDIN:  # end of input
                if self._pty is not None:
                    await asyncio.get_running_loop().run_in_executor(None, self._write, b"\x04")
                elif self.proc.stdin is not None:
                    with contextlib.suppress(OSError):
                        self.proc.stdin.close()

    def _write(self, data: bytes) -> None:
        with contextlib.suppress(OSError, ValueError):
            if self._pty is not None:
                os.write(self._pty, data)
            elif self.proc is not None and self.proc.stdin is not None:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()

    def stop(self) -> None:
        """Stop the whole session (the client left); always safe to call."""
        if self.proc is not None:
            if self.proc.poll() is None:
                terminate([self.proc.pid], STOP_GRACE_S)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=STOP_GRACE_S)
        if self.target.marked is not None:  # podman exec's own process is not the session's
            if self.target.remote:
                end_marked_remote(self.target.remote, *self.target.marked)
            else:
                end_marked(*self.target.marked)
        elif self.target.remote_marker:  # a process pod's, on its SSH node's host
            end_marked_remote(self.target.remote, self.target.remote_marker, "self")
        if self._pty is not None:
            with contextlib.suppress(OSError):
                os.close(self._pty)
            self._pty = None


def end_marked(marker: str, first: int) -> list[int]:
    """SIGKILL the processes in ``first``'s pid namespace (a container's) whose
    environment holds ``marker``: what a ``podman exec`` session left running there
    (its client's end does not end them).  The namespace is the kernel's fact; the
    marker only tells this session's processes from the container's others."""
    try:
        namespace = os.readlink(f"/proc/{first}/ns/pid")
    except OSError:
        return []  # the container is gone, and with it everything in it
    wanted, ended = marker.encode(), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(f"{entry.path}/ns/pid") != namespace:
                continue
            with open(f"{entry.path}/environ", "rb") as environ:
                if wanted not in environ.read(1 << 20).split(b"\0"):
                    continue
            os.kill(int(entry.name), signal.SIGKILL)
            ended.append(int(entry.name))
    return ended


#: ``end_marked`` as a POSIX shell runs it on an SSH node ($1: the marker, $2: the pid).
END_MARKED_SH = (
    'ns=$(readlink "/proc/$2/ns/pid") || exit 0; for d in /proc/[0-9]*; do '
    '[ "$(readlink "$d/ns/pid" 2>/dev/null)" = "$ns" ] || continue; '
    "{ tr '\\0' '\\n' < \"$d/environ\"; } 2>/dev/null | grep -qxF -e \"$1\" && "
    'kill -KILL "${d#/proc/}" 2>/dev/null; done; exit 0'
)


def end_marked_remote(ssh: tuple[str, ...], marker: str, first: int | str) -> None:
    """``end_marked`` on the SSH node ``ssh`` reaches: a session without a terminal
    leaves its command running (in a container, or in the node's host pid namespace:
    ``first`` ``self``) when its ssh goes."""
    command = shlex.join(["sh", "-c", END_MARKED_SH, "end-marked", marker, str(first)])
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run([*ssh, command], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=STOP_GRACE_S + 10, check=False)  # fmt: skip


def _pump(
    fd: int, channel: int, loop: asyncio.AbstractEventLoop, out: asyncio.Queue[bytes | None]
) -> None:
    """Blocking reads on one stream, handed to the event loop; None at its end."""
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # a pty reports EIO once the last writer is gone
            data = b""
        try:
            loop.call_soon_threadsafe(out.put_nowait, frame(channel, data) if data else None)
        except RuntimeError:  # the loop is closed: the session ended without this stream
            return
        if not data:
            return

"""A program on a real pseudo-terminal, driven the way a person types at it.

Why a helper of its own: the seeds' steps include programs that talk to a
terminal, not to a pipe — ``ssh-keygen``'s prompts, ssh's "Are you sure you
want to continue connecting", ``ringleader bash``'s interactive shell — and
``ssh`` reads its answers from ``/dev/tty``, so the pseudo-terminal must be
the program's *controlling* terminal (``pty.fork`` makes it so; a pty merely
passed as stdin is not enough).

Invariants: ``expect`` only looks at output it has not consumed yet, so a
pattern never matches an earlier screen; every wait has a deadline and a
failure shows the whole transcript; ``close`` ends the child it started, by
its pid only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

COLUMNS, LINES = 80, 24


class Ran(NamedTuple):
    """A command line typed at a shell: what the terminal showed, and its exit status."""

    out: str
    rc: int


class Terminal:
    """``argv`` running on a fresh 80x24 pseudo-terminal."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None = None) -> None:
        self.argv = list(argv)
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its controlling terminal and stdio
            try:
                if cwd:
                    os.chdir(cwd)
                os.execvpe(self.argv[0], self.argv, dict(env))
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        self.transcript = ""
        self._seen = 0  # transcript[:_seen] is consumed
        self.status: int | None = None

    def _read(self, timeout: float) -> bool:
        """Append what the program wrote within ``timeout``; False at its end of output."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the program and everything on its terminal are gone
            return False
        self.transcript += chunk.decode(errors="replace").replace("\r\n", "\n")
        return bool(chunk)

    def expect(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """Wait for ``pattern`` (a regex) in unconsumed output; consume through it."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.transcript, self._seen)
            if match:
                self._seen = match.end()
                return match
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} on the terminal:\n{self.transcript}")
            if not self._read(min(1.0, max(0.0, deadline - time.monotonic()))):
                raise AssertionError(f"output ended before {pattern!r}:\n{self.transcript}")

    def type(self, text: str) -> None:
        """Type ``text`` (``\\n`` is the Enter key)."""
        os.write(self.fd, text.replace("\n", "\r").encode())

    def run(self, line: str, timeout: float = 60) -> Ran:
        """Type a shell command line; return what the terminal showed and its exit status.

        The line ends with an ``echo`` of a marker whose typed form (``$((N+1))``)
        differs from its output, so the terminal's echo of what was typed never
        counts as the command having ended. It is on the same line, so nothing
        typed ahead waits in the terminal for the command (ssh) to read as its
        input. The typed line is left out of ``Ran.out``.
        """
        marker = len(self.transcript) + 7
        self.type(f"{line}; echo @@ended-$(({marker}+1)) rc=$?\n")
        start = self._seen
        match = self.expect(rf"@@ended-{marker + 1} rc=(\d+)", timeout)
        shown = self.transcript[start : match.start()].splitlines()
        out = "\n".join(ln for ln in shown if f"@@ended-$(({marker}+1))" not in ln)
        return Ran(out, int(match.group(1)))

    def wait(self, timeout: float = 60) -> int:
        """The program's exit status (a shell's: 128+N after signal N), reading its output."""
        deadline = time.monotonic() + timeout
        while self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                if self.status < 0:
                    self.status = 128 - self.status
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.argv[0]} did not end:\n{self.transcript}")
            self._read(0.05)
        with contextlib.suppress(OSError):
            while self._read(0.05) and select.select([self.fd], [], [], 0)[0]:
                pass
        return self.status

    def close(self) -> None:
        """End the program if it still runs (SIGHUP, as a closed terminal does, then
        SIGKILL) and release the terminal."""
        if self.status is None:
            for sig in (signal.SIGHUP, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, sig)
                with contextlib.suppress(AssertionError, ChildProcessError):
                    self.wait(timeout=5)
                if self.status is not None:
                    break
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

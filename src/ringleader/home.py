"""One server per home: the lock a server holds on its data directory, and its record.

Nomenclature:
- the *home* is a server's data directory (``RINGLEADER_HOME``, default
  ``~/.ringleader``; ``ringleader server --data-dir`` names another): its
  database, credentials and run directories;
- the *lock* is ``server.lock`` in the home, ``flock``-ed exclusively by the
  server for its whole life.  The kernel drops it when the process ends, however
  it ends (``kill -9`` included), so a held lock means a live server;
- the *record* is ``server.json`` (pid and URL) plus ``server.pid`` (the pid
  alone, for scripts and ``kill $(cat server.pid)``), written by the lock holder
  once its socket is bound and removed when it exits (SIGTERM too).

Invariants:
- only the lock holder writes or removes the record, so two servers never
  fight over it; a second server on the same home refuses before it changes
  anything, naming the first one's pid and URL;
- the lock file itself is never removed: unlinking a lock file lets a new
  server lock a fresh inode while an old one still holds the unlinked one;
- a record whose pid is dead is *stale* (the server was killed with -9):
  readers ignore it and the next server overwrites it;
- standard library only: the CLI reads the record on every command.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ringleader.errors import Conflict

LOCK_FILE = "server.lock"
RECORD_FILE = "server.json"
PID_FILE = "server.pid"
RECORD_WAIT_S = 5.0  # how long a refused server waits for the holder to write its record


@dataclass(frozen=True)
class ServerRecord:
    """Who serves a home: the server's pid and the URL a CLI on this machine reaches it at."""

    pid: int
    url: str

    def alive(self) -> bool:
        """The recorded process still runs (a zombie does not count)."""
        return _alive(self.pid)


class ServerRunning(Conflict):
    """A second server for a home that already has one."""

    def __init__(self, home: Path, record: ServerRecord | None) -> None:
        self.home = home
        self.record = record
        who = f"pid {record.pid}, {record.url}" if record else "its pid and URL not recorded yet"
        super().__init__(
            f"another ringleader server already runs for {home} ({who}); "
            "use that one (`ringleader list` finds it), stop it first, "
            "or give this one another RINGLEADER_HOME or --data-dir"
        )


def local_url(host: str, port: int) -> str:
    """The URL a client on this machine reaches a server listening on ``host:port`` at."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def read_record(home: Path) -> ServerRecord | None:
    """The home's record as written, stale or not; None without a readable one."""
    try:
        data = json.loads((home / RECORD_FILE).read_text())
        return ServerRecord(pid=int(data["pid"]), url=str(data["url"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def live_record(home: Path) -> ServerRecord | None:
    """The record of the server running for ``home``; None if none runs (or it is stale)."""
    record = read_record(home)
    return record if record is not None and record.alive() else None


class HomeLock:
    """The exclusive lock on a home, held by its one server from start to exit.

    ``acquire`` before doing anything else to the home; ``publish`` once the
    URL is known (the socket is bound); ``release`` on every way out.
    """

    def __init__(self, home: Path, fd: int) -> None:
        self.home = home
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, home: Path) -> HomeLock:
        """Lock ``home`` for this process, or raise ``ServerRunning`` naming the holder."""
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(home / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ServerRunning(home, _holders_record(home)) from None
        return cls(home, fd)

    def publish(self, url: str) -> ServerRecord:
        """Write this server's record (replacing a stale one) for CLIs to find."""
        record = ServerRecord(pid=os.getpid(), url=url)
        write_private(self.home / RECORD_FILE, json.dumps(record.__dict__) + "\n")
        write_private(self.home / PID_FILE, f"{record.pid}\n")
        return record

    def release(self) -> None:
        """Remove the record (if it is still ours) and drop the lock; idempotent."""
        if self._fd is None:
            return
        record = read_record(self.home)
        if record is None or record.pid == os.getpid():
            for name in (RECORD_FILE, PID_FILE):
                with contextlib.suppress(OSError):
                    (self.home / name).unlink()
        os.close(self._fd)  # closing the last descriptor drops the flock
        self._fd = None


def _holders_record(home: Path) -> ServerRecord | None:
    """The lock holder's record: it may be a moment from writing it (binding its port)."""
    deadline = time.monotonic() + RECORD_WAIT_S
    while True:
        record = live_record(home)
        if record is not None or time.monotonic() > deadline:
            return record
        time.sleep(0.05)


def write_private(path: Path, text: str) -> None:
    """Put ``text`` in ``path``, a file of the home only its owner reads, in one step:
    written to a new file (random name, created exclusively, never through a link)
    and renamed over the old one.  Readers (the server's record; the registry's
    address and password, read by the scheduler and agents while it restarts) see
    the old content or the new, never half of it and never none."""
    fresh = path.with_name(f".{path.name}.{os.urandom(4).hex()}")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(fresh, path)
    except BaseException:
        fresh.unlink(missing_ok=True)
        raise


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        if Path("/proc/self").exists():
            return False  # Linux, and no such process
        try:  # no /proc (macOS): ask the kernel
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return state != "Z"

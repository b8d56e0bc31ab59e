"""The hung-teardown rule: a rank whose main path raised must exit within the grace period.

Why: a Python rank that dies of an uncaught exception prints its traceback and
then tears down: it joins its non-daemon threads, runs ``atexit`` handlers and
C++ destructors.  A collective library may wait there for peers (MLX's ring
does, when a thread of the rank still waits on a peer), and those peers are
themselves blocked in a collective waiting for the failed rank: the process
stays alive, its exit never comes, and the gang hangs forever.

How: the agent arms every rank's first Python interpreter (``arm``): it puts
``rankhook/`` first on ``PYTHONPATH`` and names a marker file in
``RINGLEADER_MAIN_ENDED_FILE``.  ``rankhook/sitecustomize.py`` chains a
``sys.excepthook`` that, when an exception escapes the main path, records it in
the rank's error file (torch's format, if nothing wrote one) and then writes
the marker.  The agent watches the markers of its live ranks
(``EndedWatcher``); a rank still alive ``grace`` seconds after its marker
appeared is killed (its whole process group) and reported as failed with exit
code 1, its recorded traceback and the reason.

Nomenclature: *armed* is the one interpreter that consumed the marker's
variable (it removes it from its environment, so its children are not armed:
a helper subprocess that raises and whose parent handles it is no failure).

Invariants: nothing is armed without the plan's variable (an mpirun launcher
is not); a user's own ``sitecustomize`` still runs after ours; standard
library only (the agent imports this module).
"""

from __future__ import annotations

import os
import signal
import threading
import time

from ringleader import tenantfs
from ringleader.launch import procs

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Callable

#: The marker a rank's armed interpreter writes when its main path ended with an exception.
ENDED_FILE = "RINGLEADER_MAIN_ENDED_FILE"
#: Where ``sitecustomize.py`` lies on this host.
HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rankhook")
#: How often the agent looks for markers (only while armed ranks run).
POLL_S = 0.25
EXIT_CODE = 1  # what the interpreter would have exited with


def ended_file(error_file: str) -> str:
    """The marker's path beside the rank's error file (``.../rank-3.error.json``)."""
    stem = error_file[: -len(".error.json")] if error_file.endswith(".error.json") else error_file
    return stem + ".ended"


def arm(env: dict[str, str], marker: str) -> None:
    """Make the rank's first Python load ``rankhook/sitecustomize.py`` and name its marker."""
    env[ENDED_FILE] = marker
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = HOOK_DIR + (os.pathsep + path if path else "")


#: The most of a marker that is read: it holds "PID TIME\n".
MARKER_CAP = 256


def read_marker_time(marker: str, anchor: str | None = None) -> float | None:
    """When the exception escaped (the marker's second field), if it says.

    The rank (maybe another account) writes the marker: it is read from ``anchor``
    (the agent's run dir) through ``tenantfs``, capped, never through a link or a FIFO."""
    raw = tenantfs.read_or_none(marker, MARKER_CAP, anchor)
    try:
        moment = float((raw or b"").split()[1])
    except (ValueError, IndexError):
        return None
    return moment if 0 < moment < 1e11 else None  # a time, not nan or inf


def reason(grace_s: float) -> str:
    """Why an exit was reported for a rank that had not exited (RankFailure.reason)."""
    return f"hung in teardown {grace_s:g}s after its traceback, so it was killed"


class Watched:
    """One armed rank: its process group, marker, and when its marker was first seen."""

    __slots__ = ("marker", "pgid", "seen", "stopped")

    def __init__(self, pgid: int, marker: str) -> None:
        self.pgid = pgid
        self.marker = marker
        self.seen: float | None = None
        self.stopped = False


class EndedWatcher:
    """Polls armed ranks' markers; kills a rank that outlives its marker by ``grace``.

    ``on_hung(rank)`` is called once, just before the kill, so the exit the
    agent then reports says why.  The thread runs only while something is watched.
    """

    def __init__(self, grace: Callable[[], float], on_hung: Callable[[int], None]) -> None:
        self._grace = grace
        self._on_hung = on_hung
        self._watched: dict[int, Watched] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, rank: int, pgid: int, marker: str) -> None:
        with self._lock:
            self._watched[rank] = Watched(pgid, marker)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True)
                self._thread.start()

    def forget(self, rank: int) -> None:
        with self._lock:
            self._watched.pop(rank, None)

    def _run(self) -> None:
        while True:
            time.sleep(POLL_S)
            with self._lock:
                watched = list(self._watched.items())
                if not watched:
                    self._thread = None
                    return
            now = time.monotonic()
            for rank, w in watched:
                if w.stopped:
                    continue
                if w.seen is None:
                    if os.path.lexists(w.marker):  # its presence only: never followed
                        w.seen = now
                elif now - w.seen >= self._grace():
                    w.stopped = True
                    self._on_hung(rank)
                    procs.signal_group(w.pgid, signal.SIGKILL)

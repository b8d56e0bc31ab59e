"""A process of its own for reading and parsing what a tenant wrote (metrics files, big
request bodies).

Why: parsing megabytes of a tenant's JSON lines in Python holds the interpreter's
lock.  Off the event loop on a thread is not enough: the loop needs that lock too,
so every other user's ``/healthz`` and list waited behind a tenant's metrics read
(bench/control_plane_abuse.py measured 60x their quiet p99).  In a child process
the parsing has its own interpreter; the server's loop only waits for the answer
on a thread, holding no lock.

Nomenclature: the *reader* is the child process (``python -m
ringleader.server.services.reader_process``); a *call* is one function of
``CALLS`` run there with picklable arguments, its result pickled back.

Invariants:

- one reader per ``Reader`` (the metrics reader, ``READER``; the body checker,
  ``limits.CHECKER``), started at its first call and kept (its caches, e.g.
  ``metric_files.CACHE``, live there); a reader's calls run one at a time, in order;
- the reader ends when the server does, even killed with -9: it reads its calls
  from a pipe of which only the server holds the writing end, so the server's end
  is the reader's end of input, and it exits;
- a reader that died (killed, out of memory) fails the call in flight with a 429
  (try again) and is started afresh by the next call;
- only the functions named in ``CALLS`` run there, by name: the pipe carries names
  and arguments, never code;
- a reader runs at the lowest CPU priority (Linux's ``SCHED_IDLE``; elsewhere
  ``NICE`` steps nicer than the server): what it does is work a tenant asked for
  (their files, their bodies), so when the CPU is short it waits, not the event
  loop that answers everyone else.  A nicer task alone was not enough: the loop,
  woken, still waited out the reader's time slice (bench/control_plane_abuse.py),
  where an idle-class task is preempted at once.  Unprivileged (only ever lower),
  so it holds for a server that is not root.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import struct
import subprocess
import sys
import threading
from typing import IO, Any

from ringleader.errors import TooManyRequests

#: What a call may name: "module:function" of ringleader's own code.
CALLS = frozenset(
    {
        "ringleader.server.services.metrics:read_run_metrics",
        "ringleader.server.limits:body_problem",
    }
)
_HEADER = struct.Struct("!Q")
NICE = 10  # CFS weight 110 against the server's 1024: about a tenth of a contended core


def _send(stream: IO[bytes], value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the other end closed the pipe")
    size = _HEADER.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other end closed the pipe mid-message")
    return pickle.loads(data)


class Reader:
    """The server's side: starts the reader when needed and runs calls in it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one call at a time through the pipe
        self._proc: subprocess.Popen[bytes] | None = None

    def call(self, name: str, *args: object) -> Any:
        """``name``'s result for ``args``, computed in the reader; its exception if it
        raised one; a 429 if the reader died meanwhile."""
        if name not in CALLS:
            raise ValueError(f"{name} is not a reader call")
        with self._lock:
            proc = self._started()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                _send(proc.stdin, (name, args))
                ok, value = _receive(proc.stdout)
            except (EOFError, OSError, pickle.UnpicklingError):
                self._reap()
                raise TooManyRequests("the server's file reader stopped; try again") from None
        if not ok:
            raise value
        return value

    @property
    def pid(self) -> int | None:
        """The reader's pid while it runs (None before the first call)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def close(self) -> None:
        """End the reader (the server stops): its input closes and it exits."""
        with self._lock:
            self._reap()

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._reap()
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
                start_new_session=False,  # a signal to the server's group ends it too
            )
        return self._proc

    def _reap(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # a dead reader: its pipe is broken
                    stream.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


READER = Reader()


def serve(calls_in: IO[bytes], answers_out: IO[bytes]) -> None:
    """The reader's loop: a call in, its result (or exception) out, until input ends."""
    functions: dict[str, Any] = {}
    while True:
        try:
            name, args = _receive(calls_in)
        except EOFError:
            return
        try:
            if name not in CALLS:
                raise ValueError(f"{name} is not a reader call")
            if name not in functions:
                module, attribute = name.split(":")
                functions[name] = getattr(importlib.import_module(module), attribute)
            answer = (True, functions[name](*args))
        except Exception as exc:  # the caller raises it, as if it ran there
            answer = (False, exc)
        try:
            _send(answers_out, answer)
        except (pickle.PicklingError, TypeError, AttributeError):
            _send(answers_out, (False, RuntimeError(f"{name}: its answer cannot be pickled")))


def lowest_priority() -> None:
    """This process yields the CPU to any other (the module docstring says why)."""
    os.nice(NICE)
    with contextlib.suppress(AttributeError, OSError):  # not Linux
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def main() -> None:
    lowest_priority()
    # The pipes are the only channel: nothing printed may corrupt the answers.
    answers_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        serve(sys.stdin.buffer, answers_out)


if __name__ == "__main__":
    main()

"""Follow a submitted Slurm job from a terminal: its output live, its state, its end.

Nomenclature: the job's *output* is the one file Slurm writes its batch script's
stdout and stderr to (``--output``; on the shared filesystem, so readable here);
*following* is tailing that file while polling ``scontrol show job`` until the job
has ended.  An *interrupt* is a Ctrl-C (or SIGTERM/SIGHUP) the caller counted.

Invariants:
- the job's bytes reach ``out`` unchanged and in order (until its reader goes away,
  as ``| head`` does: following goes on, so the exit code stays the job's);
  ringleader's own words go to ``say`` (stderr), one line each;
- a pending job's reason is said once per distinct reason, in words;
- a file that shrinks or is replaced (a requeued job starts its output again) is
  read again from its start, and the requeue is said;
- when the job has ended the file is read to its end before returning, so the
  last lines (a traceback, the root cause) are never lost;
- Slurm not answering for a while is tolerated (``tolerate_s``), then raised.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from ringleader.slurm import commands
from ringleader.slurm.commands import JobInfo, JobState, SlurmError
from ringleader.slurm.reasons import pending_reason

__all__ = ["FollowEnd", "Interrupts", "OutputTail", "follow"]


class Interrupts:
    """Counts the signals a follower must react to; a signal handler as is."""

    def __init__(self) -> None:
        self.count = 0
        self.event = threading.Event()

    def __call__(self, signum: int, frame: object) -> None:
        self.count += 1
        self.event.set()

    def wait(self, seconds: float) -> None:
        """Sleep up to ``seconds``, at once awake on an interrupt."""
        self.event.wait(seconds)
        self.event.clear()


class OutputTail:
    """What a file gained since the last read, written to ``out`` as it comes."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.path: str | None = None
        self._file: BinaryIO | None = None
        self._inode: int | None = None
        self.restarted = False  # the file started again (truncated or replaced)
        self.out_closed = False  # the reader of ``out`` went away (a closed pipe)

    def pump(self) -> int:
        """Copy what is new to ``out``; the number of bytes copied."""
        if self.path is None:
            return 0
        try:
            stat = os.stat(self.path)
        except OSError:
            return 0  # not created yet (the job has not started)
        if self._file is not None and (
            stat.st_ino != self._inode or stat.st_size < self._file.tell()
        ):
            self._file.close()
            self._file = None
            self.restarted = True
        if self._file is None:
            try:
                self._file = open(self.path, "rb")  # noqa: SIM115  # kept open across pumps
            except OSError:
                return 0
            self._inode = stat.st_ino
        data = self._file.read()
        if data and not self.out_closed:
            try:
                self.out.write(data)
                self.out.flush()
            except (BrokenPipeError, ValueError):  # `| head` is done: follow on, unshown
                self.out_closed = True
        return len(data)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass
class FollowEnd:
    """How following ended: the job's last record, and whether we stopped early."""

    info: JobInfo | None  # None: Slurm no longer knows the job
    cancelled_by_us: bool = False
    stopped_following: bool = False  # an interrupt ended following, not the job


def follow(
    job_id: str,
    *,
    out: BinaryIO,
    say: Callable[[str], None],
    interrupts: Interrupts,
    cancel_on_interrupt: bool,
    output_path: str | None = None,
    poll_s: float = 0.25,
    slow_poll_s: float = 1.0,
    slow_after_s: float = 60.0,
    tail_s: float = 0.1,
    tolerate_s: float = 60.0,
) -> FollowEnd:
    """Follow ``job_id`` until it ends (or an interrupt stops following).

    ``cancel_on_interrupt``: the first interrupt cancels the job and following goes
    on to its end; a second stops following at once.  Otherwise the first interrupt
    stops following and leaves the job alone.  Slurm is asked every ``poll_s`` for
    the first ``slow_after_s`` (a short job's end is seen soon), then every
    ``slow_poll_s`` (a long job costs slurmctld little).
    """
    tail = OutputTail(out)
    tail.path = output_path
    seen = _Seen()
    handled, cancelled = 0, False
    next_poll, failing_since = 0.0, None
    slow_from = time.monotonic() + slow_after_s
    try:
        while True:
            now = time.monotonic()
            if now >= next_poll:
                next_poll = now + (poll_s if now < slow_from else slow_poll_s)
                try:
                    info = commands.job_info(job_id)
                    failing_since = None
                except SlurmError:
                    failing_since = failing_since or now
                    if now - failing_since > tolerate_s:
                        raise
                    info = seen.last
                if info is None:
                    tail.pump()
                    return FollowEnd(None, cancelled_by_us=cancelled)
                tail.path = info.stdout_path or tail.path
                seen.update(info, say)
                if info.state.ended:
                    while tail.pump():
                        pass
                    return FollowEnd(info, cancelled_by_us=cancelled)
            tail.pump()
            if tail.restarted:
                tail.restarted = False
                say(f"job {job_id}'s output started again (the job was requeued)")
            if interrupts.count > handled:
                handled = interrupts.count
                if not cancel_on_interrupt or cancelled:
                    return FollowEnd(seen.last, cancelled, stopped_following=True)
                say(f"cancelling Slurm job {job_id} (Ctrl-C again stops waiting for its end)")
                commands.cancel(job_id)
                cancelled, next_poll = True, 0.0
            interrupts.wait(max(0.0, min(tail_s, next_poll - time.monotonic())))
    finally:
        tail.close()


class _Seen:
    """What has been said about the job, so each thing is said once."""

    def __init__(self) -> None:
        self.last: JobInfo | None = None
        self.reasons: set[str] = set()
        self.running = False
        self.restarts = 0

    def update(self, info: JobInfo, say: Callable[[str], None]) -> None:
        self.last = info
        if info.restarts > self.restarts:
            self.restarts = info.restarts
            self.running = False
            say(f"job {info.job_id} was requeued by Slurm (restart {info.restarts})")
        if info.state.waiting and info.reason and info.reason not in self.reasons:
            self.reasons.add(info.reason)
            say(f"job {info.job_id} is pending: {pending_reason(info.reason)}")
        if info.state is JobState.RUNNING and not self.running:
            self.running = True
            say(f"job {info.job_id} is running on {', '.join(info.nodes) or info.node_list}")

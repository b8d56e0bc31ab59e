"""One rank's life under the host's agent: started, its output forwarded, its exit
reported.  ``RankLife`` is mixed into ``agent.Agent``, whose state it uses.

Kept apart from ``agent.py`` so that each reads whole: the agent there is the link
to the supervisor (setup, start, stop, the heartbeat) and its ranks as a set; here
is what happens to one rank, from its ``Popen`` to its ``exit`` message.  Together
they were past the house's 400 lines.  It goes wherever the agent goes: a module of
the ``ringleader.launch`` package, installed with it on every host.

Invariants (the agent's, ``agent.py``, for one rank):
- who a rank runs as comes from the agent's own environment, never the rank's;
- every rank leads its own session, so a stop signals its whole group;
- a rank that cannot start is reported: its reason in ``out``, then ``exit`` 127;
- its ``exit`` is sent only after its output was forwarded: its readers joined, each
  for a second at most (a grandchild may hold the pipe open);
- its error file and teardown marker are read from the agent's run dir, never
  through the rank's links;
- a rank the teardown watcher killed (hung after its traceback) is reported with
  the exit its exception would have made (``teardown.py``).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from subprocess import DEVNULL, PIPE, Popen

from ringleader.launch import podns, teardown
from ringleader.launch.lines import forward_lines
from ringleader.launch.rank_process import (
    CPU_AFFINITY,
    RUN_AS_VAR,
    RankProcess,
    hand_over,
    pin,
    read_error_file,
    run_as_ids,
)
from ringleader.launch.spawned import RECORD_VAR, SPAWNED_FILE, record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    from ringleader.launch.podstats import Sampler
    from ringleader.launch.protocol import MessageWriter


class RankLife:
    """Starting a rank, forwarding its lines and reporting its exit: the half of
    ``agent.Agent`` that deals with one rank (mixed in; ``Agent.__init__`` sets the
    state below)."""

    writer: MessageWriter
    job_id: str
    rundir: str | None
    ranks: dict[int, RankProcess]
    lock: threading.RLock
    swept: bool
    grace_s: float
    ended: teardown.EndedWatcher
    podstats: Sampler | None
    container: dict[str, Any] | None
    bridge: Any

    def _spawn(
        self,
        rank: int,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        error_file: str,
        marker: str | None = None,
    ) -> RankProcess | None:
        """Start one rank; None when it could not start (its exit is reported)."""
        # Only the agent's own environment (its supervisor's, from the server's
        # launch.json) says who ranks run as: never a rank's env, which a spec sets.
        env.pop(RUN_AS_VAR, None)
        env.pop(RECORD_VAR, None)  # where spawns are recorded: the agent's alone
        account = run_as_ids(os.environ.get(RUN_AS_VAR, ""))
        sampled = bool(env.get("RINGLEADER_METRICS_DIR"))  # podstats.METRICS_DIR: a server's run
        if sampled:
            from ringleader.launch import podstats  # imported only where a server asks for it

            podstats.prepare(env, account)
        try:
            if account is not None:
                hand_over(os.path.dirname(error_file), *account)
            if self.container:
                container = self.container
                if self.bridge is not None:  # mpirun itself: its argv, never the entrypoint's
                    container = {**container, "entrypoint": True}
                proc = self._in_container(container, rank, argv, cwd, env, account)
            else:
                proc = self._popen(argv, cwd, env, account)
        except OSError as exc:
            why = exc.strerror or str(exc)
            self.writer.send(
                "out", rank=rank, stream="stderr", line=f"cannot start {argv[0]!r}: {why}"
            )
            self.writer.send("exit", rank=rank, code=127, signal=None, t=time.time(), error=None)
            return None
        pin(proc.pid, env.get(CPU_AFFINITY, ""))
        # exec's kernel fact (spawned.py): in the server's run dir, or, on an SSH node
        # (no server there), in this agent's own, where ``account exec`` finds it.
        own = os.path.join(self.rundir, SPAWNED_FILE) if self.rundir else None
        record(os.environ.get(RECORD_VAR) or own, rank, proc.pid)
        if sampled:
            with self.lock:
                sampler = self.podstats = self.podstats or podstats.Sampler()
            sampler.watch(proc.pid, env, argv)
        rp = RankProcess(rank, proc, marker)
        with self.lock:
            self.ranks[rank] = rp
            self.swept = False  # a rank of this job runs: the next stop sweeps again
        return rp

    def _watch(self, rp: RankProcess, error_file: str) -> None:
        """Forward a started rank's output and report its exit."""
        rank, proc = rp.rank, rp.proc
        if rp.marker:
            self.ended.watch(rank, proc.pid, rp.marker)
        for stream, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):

            def emit(line: str, name: str = name) -> None:
                self.writer.send("out", rank=rank, stream=name, line=line)

            thread = threading.Thread(target=forward_lines, args=(stream, emit), daemon=True)
            thread.start()
            rp.readers.append(thread)
        threading.Thread(target=self._wait, args=(rp, error_file), daemon=True).start()

    def _in_container(
        self,
        container: dict[str, Any],
        rank: int,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        account: tuple[int, int] | None,
    ) -> Popen[bytes]:
        from ringleader.launch import agent_images

        assert self.rundir is not None
        return agent_images.popen(container, self.job_id, self.rundir, rank, argv, cwd, env,
                                  account)  # fmt: skip

    def _popen(
        self, argv: list[str], cwd: str, env: dict[str, str], account: tuple[int, int] | None
    ) -> Popen[bytes]:
        """Start one rank as ``account``: under a root agent in the pod's private view
        (its own /tmp and a /proc without other accounts; ``podns``), with this
        host's run dir still at its path inside."""
        keep = [self.rundir] if self.rundir else []
        with podns.popen_args(argv, cwd, env, account, keep=keep) as args:
            return Popen(**args, stdin=DEVNULL, stdout=PIPE, stderr=PIPE, start_new_session=True)

    def _wait(self, rp: RankProcess, error_file: str) -> None:
        code = rp.proc.wait()
        ended = time.time()
        self.ended.forget(rp.rank)
        if self.podstats is not None:
            self.podstats.forget(rp.proc.pid)
        for reader in rp.readers:  # a grandchild may hold the pipe open: don't wait forever
            reader.join(timeout=1.0)
        signum = -code if code < 0 else None
        # The rank's files are read from our own run dir, never through its links.
        error = read_error_file(error_file, self.rundir) if code != 0 else None
        extra: dict[str, Any] = {}
        marker = rp.marker if code != 0 else None
        raised = teardown.read_marker_time(marker, self.rundir) if marker else None
        if raised is not None:
            # It failed when its exception escaped (the root cause's time), not at its exit.
            ended, extra["raised"] = raised, True
        if rp.hung and signum == signal.SIGKILL and rp.marker:
            # The kill only ended the wait: report the exit its exception would have made.
            code, signum = teardown.EXIT_CODE, None
            extra["reason"] = teardown.reason(self.grace_s)
        self.writer.send(
            "exit",
            rank=rp.rank,
            code=128 + signum if signum else code,
            signal=signum,
            t=ended,
            error=error,
            **extra,
        )
        rp.done.set()

    def _hung(self, rank: int) -> None:
        """The watcher is about to kill ``rank`` (hung in teardown): its exit says so."""
        with self.lock:
            rp = self.ranks.get(rank)
        if rp is not None:
            rp.hung = True

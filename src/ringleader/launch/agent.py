"""The per-host agent: owns that host's ranks for the life of one launch.

Started by the supervisor (as a child locally, through ``ssh`` remotely) as
``python -m ringleader.launch.agent --job-id ID``.  It speaks the protocol in
``protocol.py`` on its stdio.

Invariants:
- every rank is the leader of its own session, so stopping signals the whole
  group (its subprocesses too) and Ctrl-C on the terminal never reaches it
  directly: the supervisor decides;
- output is forwarded one whole line at a time; a partial line waits for its
  newline or for the stream to close, but never past ``LINE_CAP`` bytes: a
  longer line goes on in marked pieces (see ``lines.LineSplitter``);
- an ``exit`` message is sent only after that rank's output was forwarded;
- its run dir (``rundir`` in ``ready``: error files, hostfile) is a fresh
  private directory (``rank_process.private_dir``: random name, 0700), removed
  at the end;
- when the link to the supervisor breaks (EOF or no heartbeat), every rank of
  the job on this host is stopped and the agent exits.  Nothing outlives it;
- a rank whose main path raised (its armed Python wrote its marker) and that
  is still alive ``grace`` seconds later is killed and reported failed
  (``teardown.py``: the hung-teardown rule);
- the ports it picks (``ring_ports``, MLX's ring) are free on this host when
  picked, fresh for every attempt.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import sys
import threading
import time
from subprocess import DEVNULL, PIPE, Popen

from ringleader.launch import netif, podns, procs, teardown
from ringleader.launch.container_runtime import drop_agent_only
from ringleader.launch.lines import forward_lines
from ringleader.launch.protocol import HEARTBEAT_TIMEOUT_S, MessageWriter, decode
from ringleader.launch.rank_process import (
    CPU_AFFINITY,
    RUN_AS_VAR,
    RankProcess,
    hand_over,
    pin,
    private_dir,
    read_error_file,
    run_as_ids,
    run_dir_prefix,
    temp_dir,
)
from ringleader.launch.spawned import RECORD_VAR, SPAWNED_FILE, record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import IO, Any

    from ringleader.launch.podstats import Sampler

# Modules are imported where they are first needed, and argparse, dataclasses,
# pathlib and typing not at all: the agent starts on the path of every launch
# (bench/launch.py's fixed cost), and each of those costs milliseconds. What runs
# around one rank's process is in rank_process.py, its line forwarding in lines.py.
LINK_LOST_GRACE_S = 2.0


class Agent:
    """Runs one host's ranks on behalf of the supervisor."""

    def __init__(self, writer: MessageWriter, job_id: str) -> None:
        self.writer = writer
        self.job_id = job_id
        self.marker = f"RINGLEADER_JOB_ID={job_id}"
        self.ranks: dict[int, RankProcess] = {}
        self.rundir: str | None = None
        self.bridge: Any = None  # mpi_bridge.Bridge: mpirun's way into its worker pods
        self.grace_s = 5.0
        self.last_message = time.monotonic()
        self.lock = threading.RLock()
        self.closing = False
        self.ended = teardown.EndedWatcher(lambda: self.grace_s, self._hung)
        self.podstats: Sampler | None = None  # CPU and memory per pod, under a server
        self.container: dict[str, Any] | None = None  # the image ranks run in (containers.py)
        self.rendezvous: Any = None  # what the framework's ranks meet at (horovod_store)
        self.rendezvous_serve = ""  # "module:function" that serves it (node 0 only)
        self.want_port = False  # node 0: it picks the master port
        # The last stop swept /proc for the job's marker and no rank started since: a
        # second stop (``bye`` after ``stop``) has nothing to find and skips that walk.
        self.swept = False

    # ----- ops -------------------------------------------------------------
    def setup(self, msg: dict[str, Any]) -> None:
        environ = msg.get("environ")
        if isinstance(environ, dict):  # started through sudo, which passes no variable
            from ringleader.launch.account import IDENTITY

            own = {k: os.environ[k] for k in IDENTITY if k in os.environ}  # sudo's: who it is
            os.environ.clear()
            os.environ.update({str(k): str(v) for k, v in environ.items()} | own)
        cwd = msg.get("cwd") or os.getcwd()
        if not os.path.isdir(cwd):
            self.writer.send("fatal", stage="working directory", detail=f"{cwd} does not exist")
            return
        try:
            iface, address = netif.for_gang(msg.get("network_interface"), msg.get("master_addr"))
        except LookupError as exc:
            self.writer.send("fatal", stage="network interface", detail=str(exc))
            return
        base = msg.get("tmpdir") or temp_dir()
        try:
            prefix = f"{run_dir_prefix(self.job_id)}{msg.get('node_rank', 0)}-"
            self.rundir = private_dir(base, prefix)
        except OSError as exc:
            self.writer.send("fatal", stage="run directory", detail=f"in {base}: {exc}")
            return
        self.grace_s = float(msg.get("grace", self.grace_s))
        if msg.get("container"):
            from ringleader.launch import agent_images

            account = run_as_ids(os.environ.get(RUN_AS_VAR, ""))
            self.container, stage, problem = agent_images.ready(
                msg["container"], self.rundir, account, self._pull_progress
            )
            if problem:  # not a crash: no rank starts, and no restart would help
                self.writer.send("fatal", stage=stage, detail=problem)
                return
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        self.want_port = bool(msg.get("want_port"))
        self.rendezvous_serve = str(msg.get("rendezvous") or "")
        try:
            port, ring = self._pick_ports(msg.get("ring_ports", 0))
        except OSError as exc:
            self.writer.send("fatal", stage="rendezvous", detail=str(exc))
            return
        self.writer.send(
            "ready",
            hostname=os.uname().nodename,
            cores=cores or 1,
            rundir=self.rundir,
            interface=iface,
            interface_address=address,
            port=port,
            ring_ports=ring,
            python=sys.executable,
        )

    def _pull_progress(self, text: str, done: bool) -> None:
        """How this host's image pull goes, for the supervisor (the workload's events)."""
        self.writer.send("progress", stage="image", detail=text, done=done)

    def start(self, msg: dict[str, Any]) -> None:
        cwd = msg["cwd"]
        if msg.get("hostfile_path"):
            with open(msg["hostfile_path"], "w") as hostfile:
                hostfile.write(msg.get("hostfile", ""))
        for path, text in (msg.get("files") or {}).items():  # MLX's ring hostfile
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as file:
                file.write(text)
        if msg.get("mpi_pods") and self.container and self.bridge is None:
            from ringleader.launch import agent_images

            assert self.rundir is not None
            account = run_as_ids(os.environ.get(RUN_AS_VAR, ""))
            ours = {k: v for k, v in os.environ.items() if k not in (RUN_AS_VAR, RECORD_VAR)}
            self.bridge = agent_images.mpi_bridge(
                self.container, self.job_id, self.rundir, msg["mpi_pods"], cwd,
                int(msg.get("mpi_node") or 0), account, ours, self.writer.send,
            )  # fmt: skip
        started: list[tuple[RankProcess, str]] = []
        try:
            for spec in msg["ranks"]:
                os.makedirs(os.path.dirname(spec["error_file"]), exist_ok=True)
                env = dict(os.environ)
                env.pop(teardown.ENDED_FILE, None)  # armed by this launch's plan only
                drop_agent_only(env)  # a server's docker socket and credentials: not a pod's
                for key, value in spec["env_defaults"].items():
                    env.setdefault(key, value)
                env.update(spec["env"])
                marker = env.get(teardown.ENDED_FILE)
                for stale in (spec["error_file"], marker):
                    if stale:  # gone, or what a rank made there (a directory): left as is
                        with contextlib.suppress(OSError):
                            os.unlink(stale)
                if marker:
                    teardown.arm(env, marker)
                rp = self._spawn(spec["rank"], spec["argv"], cwd, env, spec["error_file"], marker)
                if rp is not None:
                    started.append((rp, spec["error_file"]))
        finally:
            # Every rank is started before any is watched: the threads that read and
            # wait on a rank cost a start each, which the next rank's start would wait
            # behind. Whatever stopped the loop, the ranks it started are watched.
            for rp, error_file in started:
                self._watch(rp, error_file)

    def _pick_ports(self, ring_ports: int) -> tuple[int | None, list[int]]:
        """Node 0's master port and this host's ring ports, for a new attempt.  Where the
        framework's rendezvous is served here (Horovod's), it is up from now on, on the
        master port: no rank of any host can ask it before it listens."""
        if not self.rendezvous_serve:
            return netif.pick_ports(self.want_port, ring_ports)
        import importlib  # only a framework with a rendezvous pays for what it imports

        module, _, name = self.rendezvous_serve.partition(":")
        self._close_rendezvous()
        self.rendezvous = getattr(importlib.import_module(module), name)("", 0)
        return int(self.rendezvous.server_address[1]), netif.pick_ports(False, ring_ports)[1]

    def _close_rendezvous(self) -> None:
        rendezvous, self.rendezvous = self.rendezvous, None
        if rendezvous is not None:
            rendezvous.close()

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

    def stop(self, grace_s: float | None = None) -> None:
        with self.lock:
            ranks = list(self.ranks.values())
            self.ranks = {}
            swept = self.swept
        grace = self.grace_s if grace_s is None else grace_s
        # In an image the sweep is the runtime's: podman run passes its TERM on to the
        # container, and signalling the container's processes too gave each a second
        # TERM (a trap ran twice); close() removes the containers whatever is left.
        if ranks or not swept:
            procs.terminate(
                [rp.proc.pid for rp in ranks],
                grace,
                marker=None if self.container else self.marker,
                is_done=lambda: all(rp.proc.poll() is not None for rp in ranks),
            )
            with self.lock:
                self.swept = not self.ranks
        for rp in ranks:
            rp.done.wait(timeout=2.0)
        self._close_rendezvous()  # the attempt is over: the next one meets afresh

    def close(self, grace_s: float) -> None:
        """Stop everything and remove this host's run dir; safe to call twice."""
        with self.lock:
            if self.closing:
                return
            self.closing = True
        pulls = sys.modules.get("ringleader.launch.image_pull")  # loaded for an image only
        if pulls is not None:
            pulls.cancel_all()  # a setup still pulling when the link went: no pull outlives us
        self.stop(grace_s)
        if self.podstats is not None:
            self.podstats.close()
        if self.bridge is not None:
            self.bridge.close()
        if self.container:
            from ringleader.launch import agent_images

            agent_images.close(self.container, self.job_id, self.rundir)
        if self.rundir is not None:
            import shutil

            shutil.rmtree(self.rundir, ignore_errors=True)

    # ----- loop ------------------------------------------------------------
    def handle(self, msg: dict[str, Any]) -> bool:
        """Act on one message; False when the agent should exit."""
        op = msg["op"]
        if op == "setup":
            self.setup(msg)
        elif op == "start":
            self.start(msg)
        elif op == "stop":
            self.stop(msg.get("grace"))
            self.writer.send("stopped")
        elif op == "port":
            port, ring = self._pick_ports(msg.get("ring_ports", 0))
            self.writer.send("port", port=port, ring_ports=ring)
        elif op == "bye":
            return False
        elif op.startswith("pod_") and self.bridge is not None:  # MPI in an image
            self.bridge.relayed(msg)
        return True

    def watchdog(self, timeout_s: float) -> None:
        while not self.closing:
            time.sleep(min(1.0, timeout_s / 4))
            if time.monotonic() - self.last_message > timeout_s:
                silent = f"no word from the supervisor in {timeout_s:.0f}s"
                print(f"ringleader agent: {silent}; stopping ranks", file=sys.stderr)
                self.close(LINK_LOST_GRACE_S)
                os._exit(3)

    def serve(self, stdin: IO[bytes], heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S) -> int:
        """Act on the supervisor's messages until ``bye`` or EOF.  A thread of its own
        reads them, so the heartbeat is heard while a message takes long to act on
        (``setup`` pulling a big image): the watchdog ends only a silent link."""
        threading.Thread(target=self.watchdog, args=(heartbeat_timeout_s,), daemon=True).start()
        inbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

        def read() -> None:
            try:
                for raw in stdin:
                    self.last_message = time.monotonic()
                    if raw.strip():
                        inbox.put(raw)
            finally:
                inbox.put(None)

        threading.Thread(target=read, daemon=True).start()
        while (raw := inbox.get()) is not None:
            if not self.handle(decode(raw)):
                self.close(self.grace_s)
                return 0
        # EOF: the supervisor is gone (killed, or its SSH connection dropped).
        self.close(LINK_LOST_GRACE_S)
        return 3


USAGE = "usage: python -m ringleader.launch.agent --job-id ID [--heartbeat-timeout SECONDS]"


def parse_args(argv: list[str]) -> tuple[str, float]:
    """``--job-id ID [--heartbeat-timeout S]``; the supervisor is the only caller."""
    values = {"--job-id": "", "--heartbeat-timeout": str(HEARTBEAT_TIMEOUT_S)}
    args = list(argv)
    while args:
        flag, _, inline = args.pop(0).partition("=")
        if flag not in values or (not inline and not args):
            raise SystemExit(f"{USAGE}\nringleader agent: bad argument {flag!r}")
        values[flag] = inline or args.pop(0)
    try:
        timeout = float(values["--heartbeat-timeout"])
    except ValueError:
        raise SystemExit(
            f"{USAGE}\nringleader agent: --heartbeat-timeout must be a number"
        ) from None
    if not values["--job-id"]:
        raise SystemExit(f"{USAGE}\nringleader agent: --job-id is required")
    return values["--job-id"], timeout


def main(argv: list[str] | None = None) -> int:
    job_id, heartbeat_timeout = parse_args(sys.argv[1:] if argv is None else argv)
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but protocol messages may reach the wire
    agent = Agent(MessageWriter(out), job_id)

    def on_signal(signum: int, _frame: object) -> None:
        # Someone stopped the agent itself: its ranks must not outlive it.
        agent.close(LINK_LOST_GRACE_S)
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, on_signal)
    code = agent.serve(sys.stdin.buffer, heartbeat_timeout)
    out.flush()
    return code


def exit_now(code: int) -> None:
    """End the process once its ranks are stopped and its words flushed, without
    Python's shutdown: the thread reading the link is still blocked in stdin, holding
    its lock, and shutdown would wait a second for that lock and then abort (SIGABRT,
    "Fatal Python error: _enter_buffered_busy"), a second every launch paid."""
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())

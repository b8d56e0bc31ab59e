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

from ringleader.launch import netif, procs, teardown
from ringleader.launch.agent_ranks import RankLife
from ringleader.launch.container_runtime import drop_agent_only
from ringleader.launch.protocol import HEARTBEAT_TIMEOUT_S, MessageWriter, decode
from ringleader.launch.rank_process import (
    CPU_AFFINITY,
    RUN_AS_VAR,
    RankProcess,
    private_dir,
    run_as_ids,
    run_dir_prefix,
    temp_dir,
)
from ringleader.launch.spawned import RECORD_VAR

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import IO, Any

    from ringleader.launch.podstats import Sampler

# Modules are imported where they are first needed, and argparse, dataclasses,
# pathlib and typing not at all: the agent starts on the path of every launch
# (bench/launch.py's fixed cost), and each of those costs milliseconds. What runs
# around one rank's process is in rank_process.py, its line forwarding in lines.py, and
# its start, output and exit (the methods of one rank's life) in agent_ranks.py.
LINK_LOST_GRACE_S = 2.0

# What other modules and tests import from here.  CPU_AFFINITY is rank_process's: a rank's
# pinning moved to agent_ranks.py with its start, and the name stays importable here.
__all__ = ["CPU_AFFINITY", "LINK_LOST_GRACE_S", "USAGE", "Agent", "exit_now", "main", "parse_args"]


class Agent(RankLife):
    """Runs one host's ranks on behalf of the supervisor (one rank's life: ``RankLife``)."""

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

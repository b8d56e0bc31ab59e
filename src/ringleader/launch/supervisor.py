"""The supervisor: on the launching host, runs one launch from start to end.

It starts one agent per host, waits until every host is ready (so a missing
directory or an unreachable host is reported before any rank starts), then
runs attempts: send each agent its ranks, merge their output, and on the
first failure tell every agent to stop the gang.  With restarts left it
starts a new attempt with a fresh rendezvous (a new master port).

Invariants:
- gangs are all-or-nothing: started whole, stopped whole, restarted whole;
- one thread (``run``) owns all state; agents and signals only post events;
- ``request_stop`` is safe from a signal handler or another thread, so the
  CLI's Ctrl-C and a SIGTERM to a detached supervisor (how the server's local
  and SSH backends stop a workload) stop a launch the same way;
- every agent is asked to leave and then reaped, whatever happened.

Starting the agents and collecting their answers (and a restart's fresh ports)
is in ``agent_startup.py``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from ringleader.errors import HostUnreachable
from ringleader.hosts import Host
from ringleader.launch import frameworks
from ringleader.launch.agent_startup import (
    READY_TIMEOUT_S,
    await_ready,
    fresh_ports,
    node_facts,
    pick_master_addr,
    start_agents,
)
from ringleader.launch.links import AgentLink, Event
from ringleader.launch.observer import NullObserver, SupervisorObserver
from ringleader.launch.output import OutputSink
from ringleader.launch.plan import LaunchPlan, LaunchSpec, NodeFacts, build_plan
from ringleader.launch.protocol import HEARTBEAT_INTERVAL_S
from ringleader.launch.result import AttemptResult, LaunchResult, RankFailure
from ringleader.launch.ssh import SSHOptions

STOP_TIMEOUT_EXTRA_S = 10.0
STDERR_TAIL_LINES = 20
#: How long the peers of a rank that failed as a consequence have to report the cause.
PEER_REPORT_S = 5.0
# A failure's summary keeps this much of each of those lines (a line may be 1 MiB).
STDERR_TAIL_LINE_CHARS = 4096


@dataclass
class SupervisorState:
    """What a caller (the CLI, a server backend) can read while it runs."""

    phase: str = "Starting"  # Starting, Running, Restarting, Stopping, Succeeded, Failed, Stopped
    attempt: int = 0
    master_addr: str = ""
    master_port: int = 0


def _raised_first(msg: dict[str, Any], outcome: AttemptResult, raised_at: float | None) -> bool:
    """This exit's exception escaped before the recorded failure's did.

    Only exception times are compared (``raised``: the rank's hook recorded the
    moment, teardown.py): an exit is seen some time after the process ended, so
    a peer that raised because that process was gone could look earlier than it.
    """
    if not msg.get("raised") or raised_at is None or outcome.failure is None:
        return False
    return msg["code"] != 0 and not outcome.stopped_by and float(msg["t"]) < raised_at


class Supervisor:
    def __init__(
        self,
        spec: LaunchSpec,
        sink: OutputSink,
        ssh: SSHOptions | None = None,
        observer: SupervisorObserver | None = None,
    ) -> None:
        self.spec = spec
        self.sink = sink
        self.ssh = ssh or SSHOptions.from_env()
        self.observer: SupervisorObserver = observer or NullObserver()
        self.state = SupervisorState()
        self.events: queue.SimpleQueue[Event] = queue.SimpleQueue()  # put() is signal-safe
        self.links: list[AgentLink] = []
        self._stop_signal: int | None = None
        self._closed = threading.Event()
        self._stops_pending: set[int] = set()
        self._progressed: set[str] = set()  # hosts whose setup progress was a notice
        # Hosts that run an agent; the mpi framework runs one here, mpirun does the rest.
        self.agent_hosts: list[Host] = list(spec.hosts)

    # ----- public ----------------------------------------------------------
    def request_stop(self, signum: int) -> None:
        """Ask the launch to stop every rank and end (thread/signal safe)."""
        if self._stop_signal is None:
            self._stop_signal = signum
        self.events.put((-1, {"op": "wake"}))

    def run(self) -> LaunchResult:
        result = LaunchResult(run_id=self.spec.run_id, exit_code=0)
        threading.Thread(target=self._heartbeat, daemon=True).start()
        try:
            facts, port = self._start_agents(result)
            if facts is None:
                result.exit_code = (
                    HostUnreachable.exit_code
                    if result.setup_errors
                    else 128 + (self._stop_signal or 15)
                )
                self._set_phase("Failed")
                return result
            for attempt in range(self.spec.max_restarts + 1):
                if attempt > 0:
                    self._set_phase("Restarting")
                    port, facts = self._fresh_ports(facts)
                    if port is None:
                        break
                outcome = self._run_attempt(attempt, facts, port)
                result.attempts.append(outcome)
                if outcome.failure is None or outcome.stopped_by:
                    break
                if attempt < self.spec.max_restarts:
                    self.sink.notice(
                        f"attempt {attempt} failed: {outcome.failure.describe()}; "
                        f"restarting the gang ({attempt + 1}/{self.spec.max_restarts})"
                    )
            result.exit_code = self._exit_code(result)
            self._set_phase(
                "Succeeded"
                if result.exit_code == 0
                else ("Stopped" if self._stop_signal else "Failed")
            )
            return result
        finally:
            self._close_agents()

    # ----- phases ----------------------------------------------------------
    def _start_agents(self, result: LaunchResult) -> tuple[list[NodeFacts] | None, int]:
        master_addr = pick_master_addr(self.spec)
        self.state.master_addr = master_addr
        start_agents(self.spec, self.agent_hosts, self.ssh, self.events, master_addr, self.links)
        pull = float(self.spec.container.get("pull_timeout") or 0)  # agents pull first
        deadline = time.monotonic() + READY_TIMEOUT_S + self.ssh.connect_timeout_s + pull
        ready = await_ready(
            self.agent_hosts,
            self._next_event,
            self._stopping,
            deadline,
            result.setup_errors,
            self._progress,
            result.lasting_errors,
        )
        if (
            result.setup_errors
            or self._stop_signal is not None
            or len(ready) != len(self.agent_hosts)
        ):
            return None, 0
        facts = node_facts(ready)
        self._banner(facts)
        return facts, int(ready[0]["port"])

    def _progress(self, host: str, msg: dict[str, Any]) -> None:
        """A host's setup says how it goes (its image pull): the observer keeps the
        latest line; the first and the last are notices too, for a launch's reader."""
        text, done = str(msg.get("detail") or ""), bool(msg.get("done"))
        self.observer.on_progress(host, text, done)
        if done or host not in self._progressed:
            self._progressed.add(host)
            self.sink.notice(f"{host}: {text}")

    def _banner(self, facts: list[NodeFacts]) -> None:
        spec = self.spec
        self.sink.notice(
            f"job {spec.run_id}: {spec.world_size} ranks on {len(spec.hosts)} host(s), "
            f"master {self.state.master_addr}"
        )
        first = 0
        for host, fact in zip(spec.hosts, facts, strict=True):
            iface = spec.network_interface or fact.interface or "?"
            how = (
                "given by --network-interface" if spec.network_interface else "routes to the master"
            )
            ranks = f"{first}-{first + host.slots - 1}" if host.slots > 1 else str(first)
            self.sink.notice(f"  {host.name}: ranks {ranks}, interface {iface} ({how})")
            first += host.slots

    def _fresh_ports(self, facts: list[NodeFacts]) -> tuple[int | None, list[NodeFacts]]:
        """A new rendezvous: node 0's master port, and every host's ring ports, picked now."""
        return fresh_ports(self.links, self.agent_hosts, facts, self._next_event, self._stopping)

    def _stopping(self) -> bool:
        """A stop was requested (by a signal, the CLI or a server backend)."""
        return self._stop_signal is not None

    def _run_attempt(self, attempt: int, facts: list[NodeFacts], port: int) -> AttemptResult:
        plan = self._build_plan(attempt, facts, port)
        self.state.attempt, self.state.master_port = attempt, port
        self.observer.on_attempt_started(attempt, plan)
        self.sink.attempt_started(attempt, list(range(self.spec.world_size)))
        self._set_phase("Running")
        outcome = AttemptResult(attempt=attempt, started=time.time())
        tails: dict[int, deque[str]] = {}
        live = {r.rank for n in plan.nodes for r in n.ranks}
        for link, node in zip(self.links, plan.nodes, strict=True):
            link.send(
                "start",
                attempt=attempt,
                cwd=self.spec.cwd,
                hostfile=plan.hostfile_text,
                hostfile_path=node.hostfile_path,
                files=node.files,
                **(
                    {"mpi_pods": node.mpi_pods, "mpi_node": node.node_rank} if node.mpi_pods else {}
                ),
                ranks=[
                    {
                        "rank": r.rank,
                        "argv": r.argv,
                        "env": r.env,
                        "env_defaults": r.env_defaults,
                        "error_file": r.error_file,
                    }
                    for r in node.ranks
                ],
            )
        stop_deadline: float | None = None
        raised_at: float | None = None  # when the recorded failure's exception escaped
        leader_done = False  # rank 0 succeeded and that ends the job (on_rank0_success)
        rest_deadline: float | None = None  # then: when the rest are stopped (stop-rest)
        peer_wait: float | None = None  # a rank failed as a consequence: until then, its cause
        while live:
            node_idx, msg = self._next_event(stop_deadline or rest_deadline or peer_wait)
            if node_idx is None and stop_deadline is None:  # the rest had their time
                stop_deadline = self._stop_gang()
                continue
            if node_idx is None:  # agents did not finish stopping in time
                for link in self.links:
                    link.kill()
                break
            if self._stop_signal is not None and stop_deadline is None:
                outcome.stopped_by = self._stop_signal
                stop_deadline = self._stop_gang()
            op = msg["op"]
            if op == "out":
                self._emit(plan, msg, tails)
            elif op == "exit":
                rank = int(msg["rank"])
                live.discard(rank)
                self.observer.on_rank_exit(attempt, rank, int(msg["code"]), msg.get("signal"))
                if msg["code"] != 0 and stop_deadline is None and not leader_done:
                    failure = self._failure(plan, rank, msg, tails)
                    if outcome.failure is None or not self._consequence(failure):
                        outcome.failure = failure
                        raised_at = float(msg["t"]) if msg.get("raised") else None
                    if self._consequence(outcome.failure):  # the peer that ended says why
                        peer_wait = peer_wait or time.monotonic() + PEER_REPORT_S
                    else:
                        stop_deadline = self._stop_gang()
                elif _raised_first(msg, outcome, raised_at):
                    # Its message lost the race, its exception did not: it is the root cause
                    # (a peer's "connection to a peer was lost" can be reported first).
                    outcome.failure = self._failure(plan, rank, msg, tails)
                    raised_at = float(msg["t"])
                elif rank == 0 and msg["code"] == 0 and live and stop_deadline is None:
                    leader_done = self._rank0_succeeded(len(live))
                    if self.spec.on_rank0_success == "stop-rest":
                        rest_deadline = time.monotonic() + self.spec.grace_s
            elif op == "stopped":  # may come before other hosts' exits: note it now
                self._stops_pending.discard(node_idx)
            elif op == "eof":
                self._stops_pending.discard(node_idx)
                gone = {r.rank for r in plan.nodes[node_idx].ranks}
                live -= gone
                if stop_deadline is None:
                    host = plan.nodes[node_idx].host.name
                    outcome.failure = RankFailure(
                        rank=None,
                        host=host,
                        code=255,
                        signal=None,
                        time=time.time(),
                        reason="lost the link to this host's agent",
                        stderr_tail=msg.get("stderr", "").splitlines()[-5:],
                    )
                    stop_deadline = self._stop_gang()
            else:
                self._relay(node_idx, msg)
        if stop_deadline is None:
            self._stop_gang()  # success: still sweep grandchildren left behind
        self._await_stopped(plan, tails)
        outcome.ended = time.time()
        self.observer.on_attempt_ended(outcome)
        return outcome

    def _relay(self, node: int, msg: dict[str, Any]) -> None:
        """A message between agents, for a framework whose agents talk (MPI in an image)."""

    def _rank0_succeeded(self, still_running: int) -> bool:
        """Rank 0 exited 0 with others running: True when that ends the job."""
        ranks = f"{still_running} rank{'s' if still_running != 1 else ''} still running"
        action = {
            "stop-rest": f"the {ranks} get {self.spec.grace_s:g}s to end, then are stopped",
            "leave-rest": f"the {ranks} are left to end on their own",
        }.get(self.spec.on_rank0_success)
        if action is None:
            return False
        self.sink.notice(f"rank 0 completed, so the job succeeded; {action}")
        return True

    def _build_plan(self, attempt: int, facts: list[NodeFacts], port: int) -> LaunchPlan:
        return build_plan(
            self.spec, facts, attempt=attempt, master_addr=self.state.master_addr, master_port=port
        )

    def _failure(
        self, plan: LaunchPlan, rank: int, msg: dict[str, Any], tails: dict[int, deque[str]]
    ) -> RankFailure:
        return RankFailure(
            rank=rank,
            host=plan.rank_host(rank).name,
            code=int(msg["code"]),
            signal=msg.get("signal"),
            time=float(msg.get("t") or time.time()),
            stderr_tail=list(tails.get(rank, [])),
            error=msg.get("error"),
            reason=msg.get("reason") or "",
        )

    def _consequence(self, failure: RankFailure | None) -> bool:
        """Whether ``failure`` says the rank failed because a peer had ended (the
        framework's ``consequences``): the gang is stopped only after its peers had
        ``PEER_REPORT_S`` to report the cause, which then is the root cause."""
        words = frameworks.get(self.spec.framework).consequences
        if failure is None or not words:
            return False
        text = "\n".join(failure.stderr_tail) + str((failure.error or {}).get("message", ""))
        return any(word in text for word in words)

    def _set_phase(self, phase: str) -> None:
        self.state.phase = phase
        self.observer.on_phase(phase)

    def _stop_gang(self) -> float:
        self._set_phase("Stopping")
        for link in self.links:
            link.send("stop", grace=self.spec.grace_s)
        self._stops_pending = {link.node for link in self.links if not link.dead}
        return time.monotonic() + self.spec.grace_s + STOP_TIMEOUT_EXTRA_S

    def _emit(self, plan: LaunchPlan, msg: dict[str, Any], tails: dict[int, deque[str]]) -> None:
        rank = int(msg["rank"])
        # A stream names a log file: one of two, whatever an agent (which may run as
        # the workload's own account) sent.
        stream = "stderr" if msg["stream"] == "stderr" else "stdout"
        self.sink.line(
            rank=rank,
            world=plan.world_size,
            host=plan.rank_host(rank).name,
            stream=stream,
            text=msg["line"],
            attempt=plan.attempt,
        )
        if stream == "stderr":
            line = msg["line"]
            if len(line) > STDERR_TAIL_LINE_CHARS:
                line = line[:STDERR_TAIL_LINE_CHARS] + " [...]"
            tails.setdefault(rank, deque(maxlen=STDERR_TAIL_LINES)).append(line)

    def _await_stopped(self, plan: LaunchPlan, tails: dict[int, deque[str]]) -> None:
        """Wait for every agent's ``stopped`` so no rank of this attempt is left."""
        deadline = time.monotonic() + self.spec.grace_s + STOP_TIMEOUT_EXTRA_S
        while self._stops_pending:
            node, msg = self._next_event(deadline)
            if node is None:
                break
            if msg["op"] in ("stopped", "eof"):
                self._stops_pending.discard(node)
            elif msg["op"] == "out":  # late lines of a stopping rank still belong on the console
                self._emit(plan, msg, tails)

    def _next_event(self, deadline: float | None) -> tuple[int | None, dict[str, Any]]:
        """The next agent message, or (None, {}) once ``deadline`` passed."""
        while True:
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                return None, {}
            try:
                node, msg = self.events.get(timeout=min(timeout or 1.0, 1.0))
            except queue.Empty:
                continue
            if msg["op"] == "eof" and node >= 0:
                self.links[node].dead = True
            return node, msg

    def _exit_code(self, result: LaunchResult) -> int:
        last = result.attempts[-1] if result.attempts else None
        if self._stop_signal is not None:
            return 128 + self._stop_signal
        if last is None:
            return 1
        return last.failure.code if last.failure else 0

    # ----- background ------------------------------------------------------
    def _heartbeat(self) -> None:
        while not self._closed.wait(HEARTBEAT_INTERVAL_S):
            for link in self.links:
                link.send("ping")

    def _close_agents(self) -> None:
        self._closed.set()
        for link in self.links:
            link.send("bye")
        deadline = time.monotonic() + self.spec.grace_s + STOP_TIMEOUT_EXTRA_S
        for link in self.links:
            if not link.wait(max(0.1, deadline - time.monotonic())):
                link.kill()
                link.wait(2.0)

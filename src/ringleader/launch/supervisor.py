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
is in ``agent_startup.py``; what happens within one attempt (its ranks sent, their
output merged, the gang stopped on a failure, the root cause named) is in
``gang_attempt.py``, mixed into ``Supervisor``.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from ringleader.errors import HostUnreachable
from ringleader.hosts import Host
from ringleader.launch.agent_startup import (
    READY_TIMEOUT_S,
    await_ready,
    fresh_ports,
    node_facts,
    pick_master_addr,
    start_agents,
)
from ringleader.launch.gang_attempt import STOP_TIMEOUT_EXTRA_S, GangAttempt
from ringleader.launch.links import AgentLink, Event
from ringleader.launch.observer import NullObserver, SupervisorObserver
from ringleader.launch.output import OutputSink
from ringleader.launch.plan import LaunchSpec, NodeFacts
from ringleader.launch.protocol import HEARTBEAT_INTERVAL_S
from ringleader.launch.result import LaunchResult
from ringleader.launch.ssh import SSHOptions


@dataclass
class SupervisorState:
    """What a caller (the CLI, a server backend) can read while it runs."""

    phase: str = "Starting"  # Starting, Running, Restarting, Stopping, Succeeded, Failed, Stopped
    attempt: int = 0
    master_addr: str = ""
    master_port: int = 0


class Supervisor(GangAttempt):
    """Runs one launch: its agents, its attempts and restarts (one attempt: ``GangAttempt``)."""

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

    def _set_phase(self, phase: str) -> None:
        self.state.phase = phase
        self.observer.on_phase(phase)

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

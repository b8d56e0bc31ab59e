"""One attempt of the gang, as the supervisor runs it: every agent sent its ranks,
their output merged, the first failure stopping the whole gang, and its root cause
named.  ``GangAttempt`` is mixed into ``supervisor.Supervisor``, whose state it uses.

Kept apart from ``supervisor.py`` so that each reads whole: the supervisor there is
a launch from start to end (agents started, attempts and restarts, every agent
reaped); here is what happens within one attempt, from ``start`` to every agent's
``stopped``.  Together they were past the house's 400 lines.  ``mpi.MPISupervisor``
overrides some of these methods (its plan, mpirun's lines, its root cause).

Invariants (the supervisor's, for one attempt):
- the gang is stopped whole: on the first failure that is not a consequence, or
  once the failed rank's peers had ``PEER_REPORT_S`` to report the cause;
- the root cause is the first failure, unless a later exit's exception escaped
  earlier (``_raised_first``);
- an attempt ends only after every agent said ``stopped`` (or its time ran out),
  so no rank of it is left when the next one starts.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from ringleader.launch import frameworks
from ringleader.launch.plan import LaunchPlan, NodeFacts, build_plan
from ringleader.launch.result import AttemptResult, RankFailure

if TYPE_CHECKING:
    from collections.abc import Callable

    from ringleader.launch.agent_startup import NextEvent
    from ringleader.launch.links import AgentLink
    from ringleader.launch.observer import SupervisorObserver
    from ringleader.launch.output import OutputSink
    from ringleader.launch.plan import LaunchSpec
    from ringleader.launch.supervisor import SupervisorState

STOP_TIMEOUT_EXTRA_S = 10.0
STDERR_TAIL_LINES = 20
#: How long the peers of a rank that failed as a consequence have to report the cause.
PEER_REPORT_S = 5.0
# A failure's summary keeps this much of each of those lines (a line may be 1 MiB).
STDERR_TAIL_LINE_CHARS = 4096


def _raised_first(msg: dict[str, Any], outcome: AttemptResult, raised_at: float | None) -> bool:
    """This exit's exception escaped before the recorded failure's did.

    Only exception times are compared (``raised``: the rank's hook recorded the
    moment, teardown.py): an exit is seen some time after the process ended, so
    a peer that raised because that process was gone could look earlier than it.
    """
    if not msg.get("raised") or raised_at is None or outcome.failure is None:
        return False
    return msg["code"] != 0 and not outcome.stopped_by and float(msg["t"]) < raised_at


class GangAttempt:
    """Running one attempt to its end: the half of ``supervisor.Supervisor`` that deals
    with one attempt (mixed in; ``Supervisor.__init__`` sets the state below, and
    ``Supervisor`` has the two methods named last)."""

    spec: LaunchSpec
    sink: OutputSink
    observer: SupervisorObserver
    state: SupervisorState
    links: list[AgentLink]
    _stop_signal: int | None
    _stops_pending: set[int]
    _next_event: NextEvent
    _set_phase: Callable[[str], None]

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

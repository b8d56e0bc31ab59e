"""How a caller of the supervisor learns what happens while a launch runs.

The CLI only needs the final ``LaunchResult``; a detached supervisor run by
a server backend must also publish its progress (phase, attempt, which rank
ended how) as it happens, so the server can answer "what is it doing now"
without a pipe to the supervisor.  The supervisor calls an observer at each
of those moments; the default observer does nothing, so the CLI's launch
behaves exactly as before.

Invariants: every call comes from the supervisor's own ``run`` thread, in
the order things happened; an observer must return quickly and must not
raise (a supervisor does not protect itself from its observer).
"""

from __future__ import annotations

from typing import Protocol

from ringleader.launch.plan import LaunchPlan
from ringleader.launch.result import AttemptResult


class SupervisorObserver(Protocol):
    """Receives the supervisor's progress; see ``SupervisorState.phase`` for phases."""

    def on_phase(self, phase: str) -> None:
        """The launch entered ``phase`` (Starting, Running, Restarting, Stopping, ...)."""

    def on_attempt_started(self, attempt: int, plan: LaunchPlan) -> None:
        """Attempt ``attempt`` is about to start every rank of ``plan``."""

    def on_rank_exit(self, attempt: int, rank: int, code: int, signal: int | None) -> None:
        """A rank ended (``rank`` -1 is mpirun itself under the mpi framework)."""

    def on_attempt_ended(self, outcome: AttemptResult) -> None:
        """Every rank of the attempt is gone; ``outcome`` says how it ended."""

    def on_progress(self, host: str, text: str, done: bool) -> None:
        """Before any rank: how ``host``'s setup goes (its image pull), one line;
        ``done`` once that host's step has ended well."""


class NullObserver:
    """The observer when nobody asked: the launcher's own CLI."""

    def on_phase(self, phase: str) -> None:
        pass

    def on_attempt_started(self, attempt: int, plan: LaunchPlan) -> None:
        pass

    def on_rank_exit(self, attempt: int, rank: int, code: int, signal: int | None) -> None:
        pass

    def on_attempt_ended(self, outcome: AttemptResult) -> None:
        pass

    def on_progress(self, host: str, text: str, done: bool) -> None:
        pass

"""Background work, split by what it acts on (dstack's per-status pipelines).

- ``placing``: Pending workloads -> scheduling cycles -> preemptions, starts;
- ``reconciling``: what runs -> polls -> phases; lost nodes; lingering pods;
- ``stopping``: suspend, delete and resume -> the backend's cancel;
- ``heartbeats``: one watch per SSH node -> its readiness (its own threads).

Each pipeline has its own thread and its own workers for backend calls
(``calls``), and one shared set of busy workloads keeps a workload to one
call at a time: a stop that takes 20 s delays no other workload's placement,
poll or stop.  Every phase change goes through ``phases``.
"""

from __future__ import annotations

from ringleader.server.background.pipeline import Pipeline, World
from ringleader.server.background.placing import Placing
from ringleader.server.background.reconciling import Reconciling
from ringleader.server.background.stopping import Stopping

__all__ = ["Background", "World"]


class Background:
    """The pipelines together: started and stopped with the server, woken by the API.

    ``inline``: backend calls run in the caller's thread, and ``tick`` runs one
    pass of each pipeline in order (unit tests step the world by hand).
    """

    def __init__(self, world: World, *, interval_s: float = 0.25, inline: bool = False) -> None:
        self.world = world
        self.placing, self.reconciling, self.stopping = (
            kind(world, interval_s=interval_s, inline=inline, wake_all=self.wake)
            for kind in (Placing, Reconciling, Stopping)
        )
        self.pipelines: tuple[Pipeline, ...] = (self.placing, self.reconciling, self.stopping)

    def wake(self) -> None:
        """Something changed that any pipeline may act on (a node, a finished call)."""
        for pipeline in self.pipelines:
            pipeline.wake.set()

    def submitted(self) -> None:
        """A workload was submitted: only placing has something to do."""
        self.placing.wake.set()

    def intent_recorded(self) -> None:
        """A user asked for a stop, a delete or a resume: stopping acts on it."""
        self.stopping.wake.set()

    def start(self) -> None:
        for pipeline in self.pipelines:
            pipeline.start()

    def stop(self) -> None:
        for pipeline in self.pipelines:
            pipeline.stop()

    def tick(self) -> None:
        """One pass of each pipeline, in order (with ``inline``: calls done on return)."""
        for pipeline in self.pipelines:
            pipeline.run_once()

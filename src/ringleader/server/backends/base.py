"""The narrow interface every backend keeps (local, ssh, slurm, kubernetes).

Nomenclature:
- *request*: what the server hands a backend for one admitted workload
  (``BackendRequest``): the spec plus where files go;
- *handle*: the backend's own id for what it started (a run directory, a
  Slurm job id, a PyTorchJob name); the server stores it and passes it back;
- *native state*: what the backend reads from its engine; ``poll`` maps it
  to Run:ai phase names through one table per backend, Unknown by default.

Invariants: ``plan`` is pure (golden-testable); ``submit``/``poll``/
``cancel``/``logs`` do the I/O and are never called inside a DB
transaction; ``cancel`` is idempotent; capabilities are declared here and
checked at submit time, not discovered by failing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from ringleader.sched import GpuShare
from ringleader.spec import WorkloadSpec

# Workload phases a backend may report (Run:ai names).
BACKEND_PHASES = ("Pending", "Initializing", "Running", "Completed", "Failed", "Stopped", "Unknown")


@dataclass(frozen=True)
class Capabilities:
    multi_node: bool = False
    gpu_isolation: bool = False
    suspend: bool = True
    container_images: bool = False


@dataclass(frozen=True)
class PodPlacement:
    """Where the scheduler bound one pod: the node, its kind (``local``,
    ``simulated``, ``ssh``), and the GPU devices with each one's share; an
    SSH node's login target and the address other nodes reach it at."""

    node: str
    node_kind: str = "local"
    gpus: tuple[GpuShare, ...] = ()
    cpu_cores: float = 0.0
    ssh: str = ""
    address: str = ""


@dataclass(frozen=True)
class BackendRequest:
    """One admitted workload, as a backend sees it."""

    workload_id: str
    name: str
    project: str
    spec: WorkloadSpec
    run_dir: str  # where this workload's files (logs, state) live on the server's machine
    attempt_offset: int = 0  # attempts already used before a suspend/resume
    placements: dict[str, PodPlacement] = field(default_factory=dict)  # pod name -> binding


@dataclass(frozen=True)
class PodStatus:
    name: str  # e.g. "mnist-master-0", "mnist-worker-1", "dist-launcher"
    role: str  # "master" | "worker" | "launcher"
    index: int
    phase: str  # Pending | Running | Succeeded | Failed | Stopped | Unknown
    node: str
    exit_code: int | None = None
    attempt: int = 0
    ranks: tuple[int, ...] = ()


@dataclass(frozen=True)
class BackendStatus:
    phase: str  # one of BACKEND_PHASES
    message: str = ""
    attempt: int = 0
    pods: list[PodStatus] = field(default_factory=list)
    exit_code: int | None = None
    # Restarts are the server's to make (a gang on SSH nodes goes back to the
    # scheduler, which places it on nodes that answer): a Failed with attempts
    # left becomes Pending again instead of ending the workload.
    server_restarts: bool = False


@dataclass(frozen=True)
class LogLine:
    pod: str
    attempt: int
    stream: str  # "stdout" | "stderr"
    text: str
    time: float | None = None  # unix seconds when known


@dataclass(frozen=True)
class ExecTarget:
    """Where a command for ``exec``/``bash`` runs: one pod's node, directory and env."""

    node: str
    cwd: str
    env: dict[str, str]
    prefix: tuple[str, ...] = ()  # argv before the command (e.g. ssh -t HOST); none locally


class Backend(Protocol):
    name: str
    capabilities: Capabilities

    def plan(self, request: BackendRequest) -> object:
        """Pure: the native request (argv, sbatch script, manifest) for ``request``."""

    def submit(self, request: BackendRequest) -> str:
        """Start it; return the handle."""

    def poll(self, handle: str) -> BackendStatus:
        """Current state, mapped to our phases."""

    def cancel(self, handle: str) -> None:
        """Stop everything it started; safe to call again, or for something gone."""

    def logs(
        self, handle: str, pod: str | None = None, tail: int | None = None
    ) -> Iterator[LogLine]:
        """Log lines, oldest first; one pod or all merged."""

    def exec_target(self, handle: str, pod: str) -> ExecTarget:
        """Where to run a command inside ``pod``; Conflict when it has no live process."""

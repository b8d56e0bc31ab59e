"""The narrow interface every backend keeps (local, ssh, slurm, kubernetes).

Nomenclature:
- *request*: what the server hands a backend for one admitted workload
  (``BackendRequest``): the spec, where files go, and the scheduler's
  binding of each pod (``PodPlacement``: node, node kind, GPUs, cores);
- *plan*: the backend's native request (argv, an sbatch script, a manifest)
  built from a request by the pure ``plan``; ``submit`` runs exactly it;
- *handle*: the backend's own id for what it started (a run directory, a
  Slurm job id, a PyTorchJob name); the server stores it with the backend's
  name and passes it back;
- *native state*: what the backend reads from its engine; ``poll`` maps it
  to Run:ai phase names through the backend's one ``STATES`` table
  (``Backend.phase_of``), Unknown for anything the table does not name.
  The server does not filter the result: ``phases.observe`` decides.

Invariants: ``plan`` is pure (golden-testable); ``submit``/``poll``/
``cancel``/``logs`` do the I/O and are never called inside a DB
transaction; ``cancel`` is idempotent (the base class's template: a handle
that is unknown or already ended is a no-op); capabilities are declared here
and checked when a workload is submitted, not discovered by failing.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from ringleader.errors import Conflict, InvalidSpec
from ringleader.sched import GpuShare
from ringleader.server.phases import UNKNOWN
from ringleader.spec import WorkloadSpec

if TYPE_CHECKING:
    from ringleader.server.backends.ssh import NodeBook
    from ringleader.server.inventory import NodeDecl


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the service refuses at submit what it cannot.

    ``restarts_in_place``: the backend restarts a failed gang itself, on the
    same nodes, up to ``backoffLimit``; else a failed attempt comes back to
    the server, whose scheduler places the gang again (on nodes that answer).
    """

    multi_node: bool = False  # a gang of more than one pod
    gpu_isolation: bool = False  # devices enforced by the engine, not only by env
    suspend: bool = True
    exec: bool = False  # exec/bash into a pod, and so interactive pods
    container_images: bool = False  # runs any image, not only ringleader's stand-ins
    restarts_in_place: bool = True
    # Its engine has nodes of its own (``Backend.inventory``, e.g. a Slurm partition's)
    # and places pods on them itself: ringleader's scheduler only admits its workloads.
    engine_nodes: bool = False


@dataclass(frozen=True)
class PodPlacement:
    """Where the scheduler bound one pod: the node, its kind (``local``,
    ``simulated``, ``ssh`` ...), the GPU devices with each one's share, and
    the CPU cores it asked for.  How a backend reaches the node is its own
    business (the SSH backend keeps login targets in its ``NodeBook``)."""

    node: str
    node_kind: str = "local"
    gpus: tuple[GpuShare, ...] = ()
    cpu_cores: float = 0.0


@dataclass(frozen=True)
class RunAs:
    """The OS account a workload's own code runs as (``server/accounts.py``): its ranks,
    what they spawn, ``exec`` sessions.  Resolved by the server when the workload starts,
    never from anything its spec can set."""

    name: str
    uid: int
    gid: int
    home: str
    # A non-root server cannot switch users itself: it goes through this sudo binary
    # (``--run-as account:NAME``, ``launch/account.py``); empty: it switches (root).
    sudo: str = ""


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
    # What the server gives every pod: its URL and a token of the submitting user
    # (RINGLEADER_URL, RINGLEADER_TOKEN), so the CLI in a pod acts as that user.
    pod_env: dict[str, str] = field(default_factory=dict)
    # Who the workload's code runs as; None: as the server's own user (--run-as server).
    run_as: RunAs | None = None

    @property
    def image(self) -> str | None:
        """The image the gang runs in (the master's, else the spec's), if any."""
        return self.spec.master().image or self.spec.spec.image


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
    # What the OS measured of the pod (its cgroup), None where unmeasured; and how its
    # processes are tracked ("cgroup-v1", "cgroup-v2", "environment"; "" unknown).
    peak_memory_bytes: int | None = None
    cpu_seconds: float | None = None
    isolation: str = ""


@dataclass(frozen=True)
class BackendStatus:
    phase: str  # a workload phase (phases.WORKLOAD_PHASES), from the backend's STATES
    message: str = ""
    attempt: int = 0
    pods: list[PodStatus] = field(default_factory=list)
    exit_code: int | None = None
    # When the run ended (unix seconds), by the run's own record; None while it runs or
    # when the backend cannot tell. A server that was down when it ended stamps this.
    ended_at: float | None = None
    # The engine's own short word for why (Slurm's Reason: Resources, Priority ...), kept
    # raw beside the message's plain words; the server shows it as the phase's reason.
    # A poll's phase Pending means the engine took the run back (a Slurm preemption or
    # requeue): the server cancels what is left and queues the workload again.
    reason: str = ""
    # Each host's last word on its image pull once every host has the image (Kubernetes'
    # Pulled event): recorded even when no poll saw the pull going on.
    pulled: str = ""
    # A Failed run that a restart would meet again (its image cannot be pulled): a server
    # that restarts gangs itself fails the workload at once instead.
    lasting: bool = False


@dataclass(frozen=True)
class LogLine:
    pod: str
    attempt: int
    stream: str  # "stdout" | "stderr"
    text: str
    time: float | None = None  # unix seconds when known
    # Not a line: this many lines of the stream were rotated away before what follows
    # (a local run's capped logs); a reader that counts lines counts them, shows none.
    skipped: int = 0


@dataclass(frozen=True)
class ExecTarget:
    """Where a command for ``exec``/``bash`` runs: one pod's node, directory and env."""

    node: str
    cwd: str
    env: dict[str, str]
    prefix: tuple[str, ...] = ()  # argv before the command (e.g. ssh -t HOST); none locally
    run_as: RunAs | None = None  # the pod's account: the session runs as it (None: as the server)
    #: The pod's process (pid, start ticks) whose view (/tmp, /proc) the session enters.
    view: tuple[int, int] | None = None
    #: The pod's ``cgroup.procs`` files a session entering ``view`` is moved into by
    #: root before it drops to ``run_as`` (without a view, ``prefix`` joins them).
    join: tuple[str, ...] = ()
    #: ``prefix`` for a session on a terminal, where that differs (``podman exec
    #: --tty``: the terminal is made inside the container); None: ``prefix``.
    tty_prefix: tuple[str, ...] | None = None
    #: In a container (``podman exec``): (the ``NAME=VALUE`` the session's processes
    #: carry, the container's first process), so what the session left in the container
    #: when its client went is found (its pid namespace, that variable) and ended.
    marked: tuple[str, int] | None = None
    #: The ssh argv to the pod's node (ending with the host) when the session runs
    #: there: the whole command (``prefix`` and the argv, shell-quoted) goes through it.
    remote: tuple[str, ...] = ()
    #: A process pod's session there: the ``NAME=VALUE`` its processes carry, so what
    #: it left running when its client went is ended on the node (its ssh going does
    #: not end a command without a terminal).
    remote_marker: str = ""


@dataclass(frozen=True)
class ImagePolicy:
    """What a server's admin says of image pods on every node (``ringleader server``)."""

    #: Host directories pods may mount (``--host-path-allow``; server/host_paths.py).
    host_paths: tuple[str, ...] = ()
    #: How long each host's agent may pull an image (``--image-pull-timeout``).
    pull_timeout_s: float = 45.0
    #: The server's registry directory (server/registry.py): agents pull from it
    #: with its password; "" where the server has none.
    registry_dir: str = ""


DEFAULT_IMAGES = ImagePolicy()  # no host path (a server names them), 45 s pulls


@dataclass(frozen=True)
class BackendContext:
    """What the server gives every backend it creates."""

    python: str = sys.executable
    node_book: NodeBook | None = None  # the SSH nodes' login targets (the SSH backend's)
    pools: tuple[str, ...] = ()  # the node pools the backend serves (its nodes' pool)
    images: ImagePolicy = DEFAULT_IMAGES


PlanT = TypeVar("PlanT")


class Backend(ABC, Generic[PlanT]):
    """A backend: one module (or package) and one line in ``backends.registry``.

    Subclasses set ``name``, ``capabilities`` and ``STATES`` (native state ->
    our phase) and implement the abstract methods.  ``start`` and ``cancel``
    are templates: the server calls them, subclasses fill in the steps.
    """

    name: ClassVar[str] = "backend"
    capabilities: ClassVar[Capabilities] = Capabilities()
    STATES: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def configured(cls, context: BackendContext, arg: str = "") -> Backend[Any]:
        """The instance the server runs, from its ``BackendContext`` and the ``ARG`` of
        ``--backend NAME:ARG``.  A backend that needs neither keeps this default."""
        cls.refuse_arg(arg)
        return cls()

    @classmethod
    def refuse_arg(cls, arg: str) -> None:
        if arg:
            raise InvalidSpec(
                f"the {cls.name} backend takes no argument (got {arg!r})", "--backend"
            )

    @classmethod
    def phase_of(cls, native: str) -> str:
        """Our phase for a native state: the one table, Unknown by default."""
        return cls.STATES.get(native, UNKNOWN)

    # ----- the server's entry points (templates) ------------------------------------
    def start(self, request: BackendRequest) -> str:
        """Plan, then submit exactly that plan; return the handle.

        A backend whose plan needs facts only I/O can give (the cores other
        runs hold, say) overrides this to gather them, then still plans purely.
        """
        return self.submit(self.plan(request))

    def cancel(self, handle: str) -> None:
        """Stop everything ``handle`` started; a no-op for an unknown or ended one."""
        if self.is_live(handle):
            self.stop(handle)

    # ----- what each backend implements -------------------------------------------------
    @abstractmethod
    def plan(self, request: BackendRequest) -> PlanT:
        """Pure: the native request (argv, sbatch script, manifest) for ``request``."""

    @abstractmethod
    def submit(self, plan: PlanT) -> str:
        """Start exactly ``plan``; return the handle."""

    @abstractmethod
    def poll(self, handle: str) -> BackendStatus:
        """Current state, mapped to our phases through ``STATES``."""

    @abstractmethod
    def is_live(self, handle: str) -> bool:
        """Whether ``handle`` names something of ours that has not ended (or may not
        have: when in doubt, True, so that ``cancel`` makes sure)."""

    @abstractmethod
    def stop(self, handle: str) -> None:
        """Stop what ``handle`` started (called by ``cancel`` only when it is live)."""

    @abstractmethod
    def logs(
        self, handle: str, pod: str | None = None, tail: int | None = None
    ) -> Iterator[LogLine]:
        """Log lines, oldest first; one pod or all merged."""

    def run_dir_of(self, handle: str) -> Path | None:
        """The run directory on the server's machine that ``handle``'s ranks write to
        (logs, state, ``runtime.report``'s metrics); None: this backend keeps none."""
        return None

    def exec_target(self, handle: str, pod: str) -> ExecTarget:
        """Where to run a command inside ``pod``; Conflict when it has no live process."""
        raise Conflict(f"the {self.name} backend cannot exec into pods")

    # ----- optional: an engine with nodes and limits of its own (Slurm) ----------------
    def check_fits(self, spec: WorkloadSpec) -> None:
        """Refuse, naming the field, what this backend's engine could never run (more
        nodes than its partition has, say); called at submit.  Default: nothing."""
        return None

    def inventory(self) -> list[NodeDecl] | None:
        """The nodes the backend's engine has, read now (I/O), for the pools it serves:
        the server keeps its nodes table of their kind equal to this.  None: the backend
        has no nodes of its own (they come from the server's flags and ``nodes add``)."""
        return None

    @classmethod
    def describe_handle(cls, handle: str) -> str:
        """How ``describe`` names what a handle points at (Slurm: ``Slurm job 42``);
        "": nothing worth showing."""
        return ""


def check_supported(backend: Backend, spec: WorkloadSpec) -> None:
    """Refuse, naming the field, what ``backend`` cannot do for ``spec`` (at submit,
    before anything is stored: never discovered by failing later)."""
    caps, dist = backend.capabilities, spec.spec
    if dist.interactive and not caps.exec:
        raise InvalidSpec(
            f"the {backend.name} backend cannot exec into pods, so it runs no interactive "
            "workloads: submit without --interactive",
            "spec.interactive",
        )
    pods = len(spec.pod_layout(spec.name))
    if pods > 1 and not caps.multi_node:
        raise InvalidSpec(
            f"the {backend.name} backend runs single-pod workloads only, and this one is a "
            f"gang of {pods} pods: submit it to a node pool whose backend runs gangs",
            "spec.numWorkers",
        )
    backend.check_fits(spec)


def check_suspendable(backend: Backend) -> None:
    """Refuse a suspend the backend cannot do (its runs cannot be stopped and resumed)."""
    if not backend.capabilities.suspend:
        raise InvalidSpec(
            f"the {backend.name} backend cannot suspend workloads: delete it instead", "suspend"
        )

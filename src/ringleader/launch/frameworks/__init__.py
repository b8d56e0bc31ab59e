"""The frameworks registry: what differs between PyTorch, MPI and the next ones.

Nomenclature:
- *framework*: how a gang's ranks are started and what they are told, by
  its launcher ``name`` (``--framework pytorch``) and, where the control
  plane runs it, its ``spec_name`` (``distributedFramework: PyTorch``);
- *pod layout*: the pods of a workload (Kubeflow/Run:ai): a master that is
  rank 0 plus workers (PyTorchJob), a launcher that only runs ``mpirun``
  plus workers (MPIJob), or workers only;
- *environment contract*: the names each rank reads to find its place.
  Every rank the agents start gets ringleader's and torchrun's names
  (``plan.rank_env``: what ``ringleader.runtime`` reads); a framework adds
  its own with ``env`` (``TF_CONFIG``, ``JAX_PROCESS_ID``...);
- *how the gang starts*: the supervisor class, by ``"module:Class"``:
  agents start the ranks themselves (``Supervisor``), or one agent runs
  ``mpirun``, which starts them (``MPISupervisor``).

Adding a framework is one module that builds a :class:`Framework` and one
line in the built-ins of ``_REGISTRY`` (or a :func:`register` call from a plug-in).

Invariants: this package imports only the standard library (the launch
path and every MPI rank's wrapper import it); supervisors are imported
only by :meth:`Framework.load_supervisor`.  Registered names are unique,
lowercase, and never shadow one another's ``spec_name``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ringleader.errors import InvalidSpec
from ringleader.plugins import LazyRegistry

# The pseudo-rank of a launcher pod: it runs mpirun, not a rank.
LAUNCHER_RANK = -1
DEFAULT = "pytorch"


@dataclass(frozen=True)
class PodLayout:
    """The pods of a workload: an optional head pod, then ``num_workers`` workers."""

    name: str
    head_role: str | None = None  # "master", "launcher" or None (workers only)
    head_suffix: str | None = None  # the head pod's name after "NAME-"
    head_runs_ranks: bool = False  # a master is rank 0; a launcher runs no rank

    def pods(self, name: str, num_workers: int) -> list[tuple[str, str, int]]:
        """(pod name, role, index) of every pod, head first: the same on every backend."""
        head = [(f"{name}-{self.head_suffix}", self.head_role, 0)] if self.head_role else []
        workers = [(f"{name}-worker-{i}", "worker", i) for i in range(num_workers)]
        return [*head, *workers]


MASTER_WORKERS = PodLayout("master+workers", "master", "master-0", head_runs_ranks=True)
#: TensorFlow's TFJob: a chief (rank 0, TF_CONFIG's ``chief``) plus workers.
CHIEF_WORKERS = PodLayout("chief+workers", "chief", "chief-0", head_runs_ranks=True)
LAUNCHER_WORKERS = PodLayout("launcher+workers", "launcher", "launcher")
#: JAX's JAXJob: workers only, worker 0 the coordinator (process 0).
WORKERS_ONLY = PodLayout("workers")
#: Every role a head pod may have (``exec``/``bash`` go to it by default).
HEAD_ROLES = ("master", "chief", "launcher")


@dataclass(frozen=True)
class RankPlace:
    """Where one rank sits in its gang: what an environment contract is built from."""

    rank: int
    local_rank: int
    node_rank: int
    world_size: int
    local_world_size: int
    nnodes: int
    master_addr: str
    master_port: int
    # Every rank's "ip:port" in rank order, each a port free on its host when the gang
    # started (TF_CONFIG's cluster, MLX's ring); empty where a host picked none.
    peers: tuple[str, ...] = ()
    # Where this node's files of the framework (``Framework.files``) are, for this attempt.
    files_dir: str = ""
    host: str = ""  # this rank's host as the inventory names it
    interface: str = ""  # the network interface its peers reach it on ("" unknown)
    slots: tuple[int, ...] = ()  # ranks on each host of the gang, in host order


EnvContract = Callable[[RankPlace], dict[str, str]]
#: ``files(peers, world_size)``: the files every node of the gang holds for its ranks
#: (name -> text, written in ``RankPlace.files_dir`` before any rank starts).
NodeFiles = Callable[[tuple[str, ...], int], dict[str, str]]
#: ``check(workload_spec)``: why a submitted ``spec.WorkloadSpec`` does not fit this
#: framework, as ``(message, field)`` (the field named as the API spells it), or None.
#: Run on every submission, before anything is stored.
SpecCheck = Callable[[Any], tuple[str, str] | None]


def _no_env(_place: RankPlace) -> dict[str, str]:
    return {}


def _any_spec(_spec: Any) -> tuple[str, str] | None:
    return None


def _no_files(_peers: tuple[str, ...], _world_size: int) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class Framework:
    """One framework: its pod layout, its environment contract, how its gang starts."""

    name: str  # launcher name: ``ringleader launch --framework NAME``, ``LaunchSpec.framework``
    summary: str  # one line for ``--framework`` help
    layout: PodLayout = MASTER_WORKERS
    spec_name: str | None = None  # ``WorkloadSpec`` ``distributedFramework``; None: launch only
    supervisor: str = "ringleader.launch.supervisor:Supervisor"
    env: EnvContract = field(default=_no_env, compare=False)
    files: NodeFiles = field(default=_no_files, compare=False)
    # Ranks per worker pod: ``slotsPerWorker`` (MPI), or one (a PyTorchJob's pod is one rank).
    uses_slots: bool = False
    check: SpecCheck = field(default=_any_spec, compare=False)
    # The CLI's words: ``submit-dist VERB`` / ``training VERB submit`` (Run:ai's), the
    # example command its help shows, and what ``--workers`` counts.
    verb: str = ""
    example: str = "python train.py"
    workers_help: str = "Worker pods besides the head pod."
    wizard_label: str = ""  # the wizard's choice; the spec name when empty
    # "module:function" node 0's agent serves for each attempt, its port the master
    # port (``function(host, 0)`` -> an object with ``server_address`` and ``close()``):
    # the rendezvous a framework's ranks meet at when none of them hosts it (Horovod's).
    rendezvous: str = ""
    # Words in a failed rank's error that mean a peer had ended first (Horovod's "has
    # been shut down" reaches every rank as soon as one exits): not the root cause.
    consequences: tuple[str, ...] = ()

    @property
    def cli_verb(self) -> str:
        return self.verb or self.name

    @property
    def label(self) -> str:
        """How people name it (the wizard, help): ``wizard_label``, else the spec name."""
        return self.wizard_label or self.spec_name or self.name

    @property
    def head_pod(self) -> str:
        """What ``bash``/next steps call the head pod ("master", "chief", "launcher"),
        or "worker-0" where every pod is a worker."""
        return self.layout.head_role or "worker-0"

    def load_supervisor(self) -> type[Any]:
        """The supervisor class that starts this framework's gangs (imported now)."""
        module, _, attribute = self.supervisor.partition(":")
        return getattr(importlib.import_module(module), attribute)

    def pod_ranks(
        self, num_workers: int, slots_per_worker: int | None = None
    ) -> list[tuple[int, ...]]:
        """The ranks each pod runs, in ``layout.pods`` order (``LAUNCHER_RANK`` for a launcher)."""
        per_worker = (slots_per_worker or 1) if self.uses_slots else 1
        pods: list[tuple[int, ...]] = []
        next_rank = 0
        if self.layout.head_role and not self.layout.head_runs_ranks:
            pods.append((LAUNCHER_RANK,))
        elif self.layout.head_role:
            pods.append((0,))
            next_rank = 1
        for _ in range(num_workers):
            pods.append(tuple(range(next_rank, next_rank + per_worker)))
            next_rank += per_worker
        return pods

    def world_size(self, num_workers: int, slots_per_worker: int | None = None) -> int:
        """How many ranks a workload of ``num_workers`` workers runs."""
        return sum(
            1 for pod in self.pod_ranks(num_workers, slots_per_worker) for r in pod if r >= 0
        )


# name -> "module:attribute" of a built-in, imported on first use (kept light).
_REGISTRY: LazyRegistry[Framework] = LazyRegistry(
    "framework",
    {
        "pytorch": "ringleader.launch.frameworks.pytorch:FRAMEWORK",
        "mpi": "ringleader.launch.frameworks.mpi:FRAMEWORK",
        "tf": "ringleader.launch.frameworks.tensorflow:FRAMEWORK",
        "jax": "ringleader.launch.frameworks.jax:FRAMEWORK",
        "xgboost": "ringleader.launch.frameworks.xgboost:FRAMEWORK",
        "horovod": "ringleader.launch.frameworks.horovod:FRAMEWORK",
    },
)


def register(framework: Framework) -> Framework:
    """Add ``framework``; a name (or spec name) already taken is an error."""
    if framework.name != framework.name.lower() or not framework.name:
        raise ValueError(f"framework names are lowercase: {framework.name!r}")
    for other in _REGISTRY.values():
        if other.name == framework.name or (
            framework.spec_name and other.spec_name == framework.spec_name
        ):
            raise ValueError(f"framework {framework.name!r} clashes with {other.name!r}")
    return _REGISTRY.add(framework.name, framework)


def unregister(name: str) -> None:
    """Remove a framework (a plug-in's tests clean up after themselves)."""
    _REGISTRY.remove(name)


def names() -> list[str]:
    """Registered launcher names, built-ins first."""
    return _REGISTRY.names()


def all_frameworks() -> Iterator[Framework]:
    return _REGISTRY.values()


def get(name: str, *, flag: str = "--framework") -> Framework:
    """The framework ``name``; an unknown one is InvalidSpec naming ``flag`` and the choices."""
    found = _REGISTRY.find(name)
    if found is None:
        choices = ", ".join(_REGISTRY.names())
        raise InvalidSpec(f"unknown framework {name!r}; choose one of {choices}", flag)
    return found


def by_spec_name(spec_name: str) -> Framework | None:
    """The framework a ``WorkloadSpec`` names (``"PyTorch"``), None when none is registered."""
    return next((f for f in _REGISTRY.values() if f.spec_name == spec_name), None)

"""Pure planning: (launch spec, hosts, facts from the agents) -> LaunchPlan.

Nomenclature:
- *node*: one host of the gang, numbered in inventory order (``node_rank``).
- *rank*: one training process; global ranks fill node 0's slots first.
- *attempt*: one start of the whole gang; restarts make new attempts, each
  with a fresh rendezvous (a new master port found at that moment).
- *facts*: what each host's agent reported (cores, interface, run dir); the
  plan uses them but never looks them up itself.

Every rank gets ringleader's and torchrun's names (``rank_env``), then its
framework's own (``frameworks``: ``Framework.env``, from its place and every
rank's port each host's agent picked: MLX's ring for the default framework,
TF_CONFIG for TensorFlow...), and each node the framework's files
(``Framework.files``: MLX's ring hostfile).  ``RINGLEADER_MAIN_ENDED_FILE`` arms the rank's Python
for the hung-teardown rule (``launch/teardown.py``).

Invariants: no I/O, no clock, no randomness, so the same inputs give the
same plan and plans are golden-testable.  ``env`` is always set on a rank;
``env_defaults`` only when the host's own environment lacks the name (so a
user's OMP_NUM_THREADS or GLOO_SOCKET_IFNAME wins).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ringleader.hosts import Host, to_mpi_hostfile
from ringleader.launch import frameworks, teardown
from ringleader.launch.frameworks import RankPlace

# runtime.metrics's names, not imported: that module is the training side's (json,
# re, its step timer), and every launch would pay for it before its first rank.
METRICS_FILE = "RINGLEADER_METRICS_FILE"
METRICS_DIR = "RINGLEADER_METRICS_DIR"

# Under mpirun, the JSON of ``LaunchSpec.rank_env``: each rank applies its entry.
RANK_ENV = "RINGLEADER_RANK_ENV"


@dataclass(frozen=True)
class LaunchSpec:
    """What the user asked for: a command, where, and how to supervise it."""

    command: list[str]
    hosts: list[Host]
    run_id: str
    cwd: str
    python: str
    framework: str = frameworks.DEFAULT
    max_restarts: int = 0
    grace_s: float = 5.0
    network_interface: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    # What rank 0 exiting 0 means while other ranks still run (Kubeflow's success
    # policy: the master's success is the job's).  "wait": nothing, like torchrun,
    # the launch ends when every rank has; "stop-rest": the attempt succeeds, the
    # rest get ``grace_s`` to end on their own and are then stopped (cleanPodPolicy
    # Running/All); "leave-rest": the attempt succeeds and the rest run on
    # (cleanPodPolicy None).  Either way a later non-zero exit is no failure.
    on_rank0_success: str = "wait"
    # Per-rank additions to ``env`` (str(rank) -> env): what the scheduler bound
    # to each pod (CUDA_VISIBLE_DEVICES, the GPU share, OMP_NUM_THREADS).
    rank_env: dict[str, dict[str, str]] = field(default_factory=dict)
    # A local agent (so its ranks, keepalive and mpirun) runs as ``sudo_user`` through
    # the sudo binary ``sudo`` (``launch/account.py``); empty: as the supervisor.
    sudo: str = ""
    sudo_user: str = ""
    # Inside a Slurm allocation: its job id; every host is one of its nodes and runs its
    # agent as a job step (``srun``, launch/slurm_srun.py) instead of here or over SSH.
    slurm_job: str = ""
    # Ranks run in this image (``launch/containers.py``): {"runtime", "image", "pull",
    # "mounts" (tenant-named directories to mount), "python" (the account's helper),
    # "shm_size"}; empty: as processes.
    container: dict[str, Any] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        return sum(h.slots for h in self.hosts)


@dataclass(frozen=True)
class NodeFacts:
    """What one host's agent found out about itself before any rank starts."""

    cores: int
    rundir: str
    interface: str | None = None
    interface_address: str | None = None
    # One free port per rank of this host, picked there for this attempt (MLX's ring).
    ring_ports: tuple[int, ...] = ()


@dataclass(frozen=True)
class RankPlan:
    rank: int
    local_rank: int
    node_rank: int
    argv: list[str]
    env: dict[str, str]
    env_defaults: dict[str, str]
    error_file: str


@dataclass(frozen=True)
class NodePlan:
    node_rank: int
    host: Host
    ranks: list[RankPlan]
    hostfile_path: str
    # Files the agent writes before it starts the ranks: path -> text.
    files: dict[str, str] = field(default_factory=dict)
    # MPI in an image: the worker pods mpirun starts its daemons in, through this
    # node's agent (mpi_bridge): pod -> {"rank": its first rank, "env": its own}.
    mpi_pods: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchPlan:
    run_id: str
    attempt: int
    world_size: int
    master_addr: str
    master_port: int
    nodes: list[NodePlan]
    hostfile_text: str

    def rank_host(self, rank: int) -> Host:
        for node in self.nodes:
            if any(r.rank == rank for r in node.ranks):
                return node.host
        raise KeyError(rank)


def attempt_dir(rundir: str, attempt: int) -> str:
    return f"{rundir.rstrip('/')}/attempt-{attempt}"


def rank_env(
    spec: LaunchSpec,
    *,
    rank: int,
    local_rank: int,
    node_rank: int,
    attempt: int,
    master_addr: str,
    master_port: int,
    error_file: str,
    hostfile_path: str,
) -> dict[str, str]:
    """The torchrun-compatible environment plus ringleader's own names."""
    hosts = spec.hosts
    local_world = hosts[node_rank].slots
    node_ips = "\n".join(h.address for h in hosts)
    common = {
        "RANK": rank,
        "LOCAL_RANK": local_rank,
        "WORLD_SIZE": spec.world_size,
        "LOCAL_WORLD_SIZE": local_world,
        "NODE_RANK": node_rank,
        "NNODES": len(hosts),
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": master_port,
    }
    env = {k: str(v) for k, v in common.items()}
    env.update({f"RINGLEADER_{k}": str(v) for k, v in common.items()})
    env.update(
        {
            "GROUP_RANK": str(node_rank),
            "GROUP_WORLD_SIZE": str(len(hosts)),
            "ROLE_NAME": "default",
            "ROLE_RANK": str(rank),
            "ROLE_WORLD_SIZE": str(spec.world_size),
            "TORCHELASTIC_RESTART_COUNT": str(attempt),
            "TORCHELASTIC_MAX_RESTARTS": str(spec.max_restarts),
            "TORCHELASTIC_RUN_ID": spec.run_id,
            "TORCHELASTIC_USE_AGENT_STORE": "False",
            "TORCHELASTIC_ERROR_FILE": error_file,
            "PYTHONUNBUFFERED": "1",
            "RINGLEADER_JOB_ID": spec.run_id,
            "RINGLEADER_RESTART_COUNT": str(attempt),
            "RINGLEADER_MAX_RESTARTS": str(spec.max_restarts),
            "RINGLEADER_ERROR_FILE": error_file,
            "RINGLEADER_NODE_IPS": node_ips,
            "RINGLEADER_MASTER_NODE_IP": master_addr,
            "RINGLEADER_HOSTFILE": hostfile_path,
            "RINGLEADER_HOST": hosts[node_rank].name,
            teardown.ENDED_FILE: teardown.ended_file(error_file),
        }
    )
    # runtime.report's file, where a reader outlives the run (the server's run dir);
    # without a metrics dir (a plain ``ringleader launch``) report() is a no-op.
    metrics_dir = spec.env.get(METRICS_DIR)
    if metrics_dir:
        env[METRICS_FILE] = f"{metrics_dir.rstrip('/')}/rank-{rank}.attempt-{attempt}.jsonl"
    return env


def peer_addresses(spec: LaunchSpec, facts: list[NodeFacts]) -> tuple[str, ...]:
    """Every rank's "ip:port" in rank order (``RankPlace.peers``: TF_CONFIG's cluster,
    MLX's ring), from the ports each host's agent picked; empty when a host picked none.

    A rank listens where its peers reach its host: the address of the interface
    that routes to the master (what the agent found), else the inventory's address.
    """
    addresses: list[str] = []
    for host, fact in zip(spec.hosts, facts, strict=True):
        if len(fact.ring_ports) < host.slots:
            return ()
        ip = fact.interface_address or host.address
        addresses.extend(f"{ip}:{port}" for port in fact.ring_ports[: host.slots])
    return tuple(addresses)


def _interface_env(spec: LaunchSpec, facts: NodeFacts) -> tuple[dict[str, str], dict[str, str]]:
    """--network-interface is forced on every rank; a picked one is a default."""
    if spec.network_interface:
        forced = {
            "GLOO_SOCKET_IFNAME": spec.network_interface,
            "NCCL_SOCKET_IFNAME": spec.network_interface,
            "RINGLEADER_NETWORK_INTERFACE": spec.network_interface,
        }
        return forced, {}
    if not facts.interface:
        return {}, {}
    picked = {"GLOO_SOCKET_IFNAME": facts.interface, "NCCL_SOCKET_IFNAME": facts.interface}
    return {"RINGLEADER_NETWORK_INTERFACE": facts.interface}, picked


def build_plan(
    spec: LaunchSpec,
    facts: list[NodeFacts],
    *,
    attempt: int,
    master_addr: str,
    master_port: int,
) -> LaunchPlan:
    """Assign global ranks to hosts in order and compute every rank's env."""
    if len(facts) != len(spec.hosts):
        raise ValueError("one NodeFacts per host is required")
    framework = frameworks.get(spec.framework)
    peers = peer_addresses(spec, facts)
    node_files = framework.files(peers, spec.world_size)  # the same on every node
    names = [h.name for h in spec.hosts]
    # One name per node (a scope per host for Horovod): a machine listed twice is two.
    host_names = [n if names.count(n) == 1 else f"{n}-{i}" for i, n in enumerate(names)]
    nodes: list[NodePlan] = []
    next_rank = 0
    for node_rank, (host, fact) in enumerate(zip(spec.hosts, facts, strict=True)):
        adir = attempt_dir(fact.rundir, attempt)
        hostfile_path = f"{fact.rundir.rstrip('/')}/hostfile"
        forced_if, default_if = _interface_env(spec, fact)
        threads = max(1, fact.cores // host.slots)
        ranks: list[RankPlan] = []
        for local_rank in range(host.slots):
            rank = next_rank
            next_rank += 1
            error_file = f"{adir}/rank-{rank}.error.json"
            env = rank_env(
                spec,
                rank=rank,
                local_rank=local_rank,
                node_rank=node_rank,
                attempt=attempt,
                master_addr=master_addr,
                master_port=master_port,
                error_file=error_file,
                hostfile_path=hostfile_path,
            )
            place = RankPlace(
                rank=rank,
                local_rank=local_rank,
                node_rank=node_rank,
                world_size=spec.world_size,
                local_world_size=host.slots,
                nnodes=len(spec.hosts),
                master_addr=master_addr,
                master_port=master_port,
                peers=peers,
                files_dir=adir,
                host=host_names[node_rank],
                interface=spec.network_interface or fact.interface or "",
                slots=tuple(h.slots for h in spec.hosts),
            )
            env.update(framework.env(place))  # the framework's own names
            env.update(forced_if)
            env.update(spec.env)
            env.update(spec.rank_env.get(str(rank), {}))
            defaults = {"OMP_NUM_THREADS": str(threads), **default_if}
            ranks.append(
                RankPlan(
                    rank=rank,
                    local_rank=local_rank,
                    node_rank=node_rank,
                    argv=list(spec.command),
                    env=env,
                    env_defaults=defaults,
                    error_file=error_file,
                )
            )
        files = {f"{adir}/{name}": text for name, text in node_files.items()}
        nodes.append(NodePlan(node_rank, host, ranks, hostfile_path, files))
    return LaunchPlan(
        run_id=spec.run_id,
        attempt=attempt,
        world_size=spec.world_size,
        master_addr=master_addr,
        master_port=master_port,
        nodes=nodes,
        hostfile_text=to_mpi_hostfile(spec.hosts),
    )

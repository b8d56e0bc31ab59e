"""The ``mpirun`` command line of the ``mpi`` framework (frameworks/mpi.py).

The gang goes to OpenMPI's ``mpirun`` (what Horovod and mpi4py programs
expect) with a generated hostfile; each rank runs through
``ringleader.launch.mpi_rank``, which maps OMPI_* to RANK/WORLD_SIZE/LOCAL_RANK
so PyTorch code works too, forwards whole lines, and reports its exit for the
root-cause summary.

Pure: argv and hostfile building only, golden-testable.
"""

from __future__ import annotations

import json
import shlex

from ringleader.hosts import Host
from ringleader.launch.frameworks import LAUNCHER_RANK
from ringleader.launch.plan import RANK_ENV, LaunchSpec
from ringleader.launch.ssh import SSHOptions


def hostfile_name(host: Host) -> str:
    """How the hostfile names ``host`` (this machine is ``localhost``)."""
    return "localhost" if host.is_local else host.address


def merged_hosts(hosts: list[Host]) -> list[tuple[str, Host]]:
    """One entry per machine, in order of first appearance, its slots summed.

    OpenMPI refuses a hostfile that gives one machine's slot count twice
    ("multiple definitions of the slot count"), which a hosts.json listing a
    machine once per rank would make.  With ``--map-by slot`` mpirun fills
    these entries' slots in this order: rank numbers follow it.
    """
    merged: dict[str, Host] = {}
    for host in hosts:
        name = hostfile_name(host)
        seen = merged.get(name)
        if seen is not None:
            host = Host(seen.ssh, seen.address, seen.slots + host.slots)
        merged[name] = host
    return list(merged.items())


def hostfile_text(hosts: list[Host]) -> str:
    """The gang's MPI hostfile: one ``NAME slots=N`` line per machine."""
    return "".join(f"{name} slots={host.slots}\n" for name, host in merged_hosts(hosts))


def mpirun_argv(
    spec: LaunchSpec,
    *,
    hostfile_path: str,
    error_dir: str,
    attempt: int,
    master_addr: str,
    master_port: int,
    ssh: SSHOptions,
    as_root: bool,
    rsh_agent: str = "",
) -> list[str]:
    """The ``mpirun`` command line for one attempt of ``spec``.  ``rsh_agent``: how
    mpirun reaches the hostfile's entries (in an image: its worker pods, through
    ``mpi_bridge``); else ssh, to hosts other than this one."""
    argv = ["mpirun", "--hostfile", hostfile_path, "-np", str(spec.world_size)]
    argv += ["--map-by", "slot", "--tag-output"]
    if as_root:
        argv.append("--allow-run-as-root")
    # (not plm_rsh_no_tree_spawn with the bridge: it makes each daemon --daemonize, and
    # a daemon that leaves its pod's command is stopped with that pod's container)
    agent = remote_shell(spec, ssh, rsh_agent)
    if agent:
        argv += ["--mca", "plm_rsh_agent", agent]
    if spec.network_interface:
        argv += ["--mca", "btl_tcp_if_include", spec.network_interface]
        argv += ["--mca", "oob_tcp_if_include", spec.network_interface]
    exported = {
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "PYTHONUNBUFFERED": "1",
        "RINGLEADER_JOB_ID": spec.run_id,
        "TORCHELASTIC_RUN_ID": spec.run_id,
        "RINGLEADER_RESTART_COUNT": str(attempt),
        "TORCHELASTIC_RESTART_COUNT": str(attempt),
        "TORCHELASTIC_MAX_RESTARTS": str(spec.max_restarts),
        "RINGLEADER_MAX_RESTARTS": str(spec.max_restarts),
        "RINGLEADER_ERROR_DIR": error_dir,
        "RINGLEADER_HOSTFILE": hostfile_path,
        "RINGLEADER_NODE_IPS": "\n".join(h.address for h in spec.hosts),
        "RINGLEADER_MASTER_NODE_IP": master_addr,
        "RINGLEADER_NNODES": str(len(spec.hosts)),
        "NNODES": str(len(spec.hosts)),
    }
    if spec.network_interface:
        exported["GLOO_SOCKET_IFNAME"] = spec.network_interface
        exported["NCCL_SOCKET_IFNAME"] = spec.network_interface
    exported.update(spec.env)
    ranks = {k: v for k, v in spec.rank_env.items() if k != str(LAUNCHER_RANK)}  # not mpirun's
    if ranks:  # each rank picks its own from this (mpi_rank.rank_environment)
        exported[RANK_ENV] = json.dumps(ranks, separators=(",", ":"))
    for key, value in exported.items():
        argv += ["-x", f"{key}={value}"]
    if rsh_agent:  # the image's own software runs the ranks: no ringleader there, and
        # each worker pod's container is in its cgroup already (no join shim)
        from ringleader.launch.containers import command_of

        return [*argv, *command_of(spec.command)]
    return [*argv, spec.python, "-m", "ringleader.launch.mpi_rank", "--", *spec.command]


def remote_shell(spec: LaunchSpec, ssh: SSHOptions, rsh_agent: str = "") -> str:
    """How mpirun reaches the hostfile's entries: ``rsh_agent`` (in an image: the
    bridge to its worker pods), else ssh with the launch's options when a host is
    another machine; "" when every rank is on this one."""
    if rsh_agent:
        return rsh_agent
    if any(not h.is_local for h in spec.hosts):
        rsh = ["ssh", *(["-F", ssh.config_file] if ssh.config_file else []), "-o", "BatchMode=yes"]
        return shlex.join(rsh)
    return ""


def launcher_defaults(
    spec: LaunchSpec, ssh: SSHOptions, hostfile_path: str, rsh_agent: str = ""
) -> dict[str, str]:
    """What a shell in the launcher pod needs for a plain ``mpirun`` to start the gang's
    ranks where they belong, as in Kubeflow's MPIJob launcher: the gang's hostfile
    and the remote shell as OpenMPI's defaults (its ``OMPI_MCA_`` variables)."""
    env = {"OMPI_MCA_orte_default_hostfile": hostfile_path}
    agent = remote_shell(spec, ssh, rsh_agent)
    if agent:
        env["OMPI_MCA_plm_rsh_agent"] = agent
    return env


def worker_pods(spec: LaunchSpec) -> dict[str, list[int]]:
    """MPI in an image: its worker pods in rank order, each with its ranks (the
    server's ``RINGLEADER_POD`` of each rank; a launch without a server: one pod per
    host, ``node-I``)."""
    pods: dict[str, list[int]] = {}
    for pod, rank, _ in _pod_slots(spec):
        pods.setdefault(pod, []).append(rank)
    return pods


def worker_pod_hosts(spec: LaunchSpec) -> dict[str, Host]:
    """Where each worker pod of ``worker_pods`` runs (its ranks' host)."""
    return {pod: host for pod, _, host in _pod_slots(spec)}


def _pod_slots(spec: LaunchSpec) -> list[tuple[str, int, Host]]:
    """(pod, rank, host) for each rank, in mpirun's order (its hostfile's)."""
    slots, rank = [], 0
    for index, (_, host) in enumerate(merged_hosts(spec.hosts)):
        for _ in range(host.slots):
            name = spec.rank_env.get(str(rank), {}).get("RINGLEADER_POD") or f"node-{index}"
            slots.append((name, rank, host))
            rank += 1
    return slots


def pods_hostfile_text(pods: dict[str, list[int]]) -> str:
    """The hostfile of an MPI gang in an image: one ``POD slots=N`` line per worker pod."""
    return "".join(f"{pod} slots={len(ranks)}\n" for pod, ranks in pods.items())

"""From what a user typed (flags, hostfiles) to a ``LaunchSpec``.

Shared by the CLI and any other caller so the same rules apply everywhere:
which hosts, how many ranks each, and how the command is run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ringleader.errors import InvalidSpec
from ringleader.hosts import Host, load_hostfile, parse_host_list, with_slots
from ringleader.launch import frameworks
from ringleader.launch.plan import LaunchSpec
from ringleader.launch.prestart import new_run_id

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from ringleader.launch.launch_args import LaunchArgs
    from ringleader.slurm.allocation import Allocation


def resolve_hosts(
    *,
    nproc: int | None,
    hostfile: str | None,
    hosts_flag: str | None,
    nproc_per_node: int | None,
    allocation: Allocation | None = None,
) -> list[Host]:
    """The gang's hosts: a hostfile, ``-H``, a Slurm allocation's nodes, or ``-n`` ranks
    on this machine."""
    if hostfile and hosts_flag:
        raise InvalidSpec("give either --hostfile or -H, not both", "--hostfile")
    if nproc is not None and nproc < 1:
        raise InvalidSpec("must be at least 1", "-n/--nproc")
    if hostfile:
        hosts = load_hostfile(hostfile)
    elif hosts_flag:
        hosts = parse_host_list(hosts_flag)
    elif allocation is not None:
        hosts = allocation.hosts()
    else:
        hosts = [Host("localhost", "127.0.0.1", nproc_per_node or nproc or 1)]
        return hosts
    hosts = with_slots(hosts, nproc_per_node)
    if nproc is not None:
        hosts = first_slots(hosts, nproc)
    return hosts


def first_slots(hosts: list[Host], nproc: int) -> list[Host]:
    """Keep the first ``nproc`` slots in host order, as ``mpirun -np`` does."""
    total = sum(h.slots for h in hosts)
    if nproc > total:
        raise InvalidSpec(f"asks for {nproc} ranks but the hosts have {total} slots", "-n/--nproc")
    kept: list[Host] = []
    left = nproc
    for h in hosts:
        if left == 0:
            break
        take = min(h.slots, left)
        kept.append(Host(h.ssh, h.address, take))
        left -= take
    return kept


def resolve_command(command: list[str], python: str) -> list[str]:
    """Run ``python``/``python3``/``x.py`` with the launcher's interpreter.

    Why: ranks must use the same interpreter on every host (and the venv the
    user launched from), not whatever ``python`` is first on a remote PATH.
    """
    if not command:
        raise InvalidSpec("no command given; put it after --, e.g. `-- python train.py`", "command")
    head = command[0]
    if head in ("python", "python3"):
        return [python, *command[1:]]
    if head.endswith(".py") and not os.access(head, os.X_OK):
        return [python, *command]
    return list(command)


def parse_env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not key.replace("_", "a").isalnum():
            raise InvalidSpec(f"expected KEY=VALUE, got {pair!r}", "-e/--env")
        env[key] = value
    return env


def build_spec(
    command: list[str],
    *,
    nproc: int | None = None,
    hostfile: str | None = None,
    hosts_flag: str | None = None,
    nproc_per_node: int | None = None,
    framework: str = frameworks.DEFAULT,
    max_restarts: int = 0,
    grace_s: float = 5.0,
    network_interface: str | None = None,
    env: dict[str, str] | None = None,
    run_id: str | None = None,
    cwd: str | None = None,
    python: str | None = None,
    allocation: Allocation | None = None,
) -> LaunchSpec:
    """The launch, checked; ``allocation``: the Slurm allocation whose nodes run the ranks
    (explicit hosts win over it)."""
    frameworks.get(framework)  # an unknown name: InvalidSpec naming --framework and the choices
    if max_restarts < 0:
        raise InvalidSpec("must be 0 or more", "--max-restarts")
    if grace_s < 0:
        raise InvalidSpec("must be 0 or more seconds", "--grace")
    python = python or sys.executable
    if hostfile or hosts_flag:
        allocation = None
    hosts = resolve_hosts(
        nproc=nproc,
        hostfile=hostfile,
        hosts_flag=hosts_flag,
        nproc_per_node=nproc_per_node,
        allocation=allocation,
    )
    return LaunchSpec(
        command=resolve_command(command, python),
        hosts=hosts,
        run_id=run_id or new_run_id(),
        cwd=str(Path(cwd or os.getcwd()).resolve()),
        python=python,
        framework=framework,
        max_restarts=max_restarts,
        grace_s=grace_s,
        network_interface=network_interface,
        env=env or {},
        slurm_job=allocation.job_id if allocation is not None else "",
    )


#: Kubernetes' imagePullPolicy values (Run:ai's --image-pull-policy).
PULL_POLICIES = ("Always", "IfNotPresent", "Never")


def check_image(args: LaunchArgs) -> tuple[str, str]:
    """``--image``, its pull policy and runtime, checked: (image, policy)."""
    from ringleader.launch.containers import RUNTIMES, bad_reference

    if not args.image:
        flag = "--image-pull-policy" if args.image_pull_policy else "--container-runtime"
        raise InvalidSpec("needs --image IMAGE", flag)
    if args.container_runtime and args.container_runtime not in RUNTIMES:
        raise InvalidSpec(f"{args.container_runtime!r} is not {' or '.join(RUNTIMES)}",
                          "--container-runtime")  # fmt: skip
    if problem := bad_reference(args.image):
        raise InvalidSpec(f"{args.image!r} is not an image reference: {problem}", "--image")
    policy = args.image_pull_policy or "IfNotPresent"
    if policy not in PULL_POLICIES:
        raise InvalidSpec(f"{policy!r} is not one of {', '.join(PULL_POLICIES)}",
                          "--image-pull-policy")  # fmt: skip
    return args.image, policy

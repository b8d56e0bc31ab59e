"""The supervisor's first phase: one agent per host, started and set up, and every
host's answer collected before any rank starts; and, for a restart, a fresh
rendezvous (new ports) asked of the same agents.

Invariants: a host that cannot take part (no answer in time, a fatal setup, a
broken link) is reported by name, with a fix where ssh's failure says one, and
no rank starts anywhere; an agent started as another account (sudo) gets its
environment in ``setup``, since sudo passes it none.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ringleader.launch import frameworks, netif, prestart, spawned
from ringleader.launch.links import AgentLink, Event, agent_argv, start_link
from ringleader.launch.plan import LaunchSpec, NodeFacts
from ringleader.launch.ssh import SSHOptions, classify_failure

if TYPE_CHECKING:
    import queue

    from ringleader.hosts import Host

READY_TIMEOUT_S = 60.0
#: The supervisor's event source: the next agent message, or (None, {}) after a deadline.
NextEvent = Callable[[float | None], tuple[int | None, dict[str, Any]]]


def pick_master_addr(spec: LaunchSpec) -> str:
    """Node 0's address as every rank can reach it."""
    first = spec.hosts[0]
    if spec.slurm_job:  # Slurm's NodeAddr of node 0, where every node reaches it
        return first.address
    remote = [h for h in spec.hosts if not h.is_local]
    if not first.is_local:
        return first.address
    if not remote:
        return "127.0.0.1"
    return netif.source_address_toward(remote[0].address) or first.address


def start_agents(
    spec: LaunchSpec,
    hosts: list[Host],
    ssh: SSHOptions,
    events: queue.SimpleQueue[Event],
    master_addr: str,
    links: list[AgentLink],
) -> None:
    """Start an agent on each of ``hosts`` and send it ``setup``; each link goes into
    ``links`` as soon as it exists, so the caller can close it whatever happens next."""
    container = _pinned_container(spec, hosts)
    for node, host in enumerate(hosts):
        env = prestart.agent_env()
        sudo = ("", "")
        if spec.slurm_job:  # a job step on that node instead (launch/slurm_srun.py)
            from ringleader.launch.slurm_srun import SrunLink, agent_step_argv, srun_env

            argv = agent_step_argv(spec.slurm_job, host.ssh, python=spec.python, run_id=spec.run_id)
            link = start_link(node, host, argv, srun_env(env), events, link_type=SrunLink)
        else:
            # As another account (sudo): sudo passes it no variable, so its environment
            # comes in setup, and it starts from / (the run's directory is not its).
            sudo = (spec.sudo, spec.sudo_user) if host.is_local and spec.sudo else ("", "")
            argv = agent_argv(
                host, python=spec.python, cwd=spec.cwd, job_id=spec.run_id, ssh=ssh, sudo=sudo
            )
            started = prestart.take(spec.python, spec.run_id) if host.is_local else None
            cwd = "/" if sudo[0] else None
            link = start_link(node, host, argv, env, events, started, cwd=cwd)
            if sudo[0]:  # the account's agent cannot record its ranks: this records it
                record = os.environ.get(spawned.RECORD_VAR)
                spawned.record(record, spawned.AGENT_RANK, link.proc.pid)
        links.append(link)
        link.send(
            "setup",
            cwd=spec.cwd,
            master_addr=master_addr,
            want_port=node == 0,
            # Node 0 serves the framework's rendezvous on the master port (Horovod's).
            rendezvous=frameworks.get(spec.framework).rendezvous if node == 0 else "",
            ring_ports=host.slots,  # one per rank: MLX's ring listens there
            network_interface=spec.network_interface,
            node_rank=node,
            grace=spec.grace_s,
            container=_container_for(container, host),
            **({"environ": env} if sudo[0] else {}),
        )


def _pinned_container(spec: LaunchSpec, hosts: list[Host]) -> dict[str, Any]:
    """The gang's image as every host must run it ({} for ranks in no image).

    The image modules are imported only here, for a launch in an image: the
    registry's client pulls in urllib and http (~10 ms), which a plain launch
    would pay before its first rank (bench/launch.py's fixed cost).
    """
    if not spec.container:
        return {}
    from ringleader.launch.image_pin import pinned_here
    from ringleader.launch.registry_pull import pinned

    # A cluster-registry image by the digest its tag names now: the same on every host.
    container = pinned(spec.container)
    # A localhost/ image: as the head holds it, or the host says it differs.
    return pinned_here(container, any(not h.is_local for h in hosts))


def _container_for(container: dict[str, Any], host: Host) -> dict[str, Any] | None:
    """``container`` as ``host``'s agent gets it; None for ranks in no image.  Another
    host gets the registry's password, not the head's directory."""
    if not container:
        return None
    from ringleader.launch.image_pin import pinned_for
    from ringleader.launch.registry_pull import for_host

    return for_host(pinned_for(container, host.name), host.name, host.is_local) or None


#: An agent's ``fatal`` stages that a restart would meet again, on any node: its image
#: cannot be had (the registry's refusal, a pull past its time limit), or a volume the
#: pod's account may not mount. Not a crash: the workload fails without restarts.
LASTING_STAGES = frozenset({"image", "volume"})


def await_ready(
    hosts: list[Host],
    next_event: NextEvent,
    stopping: Callable[[], bool],
    deadline: float,
    setup_errors: list[str],
    on_progress: Callable[[str, dict[str, Any]], None] | None = None,
    lasting: list[str] | None = None,
) -> dict[int, dict[str, Any]]:
    """Every host's ``ready`` message by node; what went wrong goes into ``setup_errors``
    (and into ``lasting`` too where no restart would help, ``LASTING_STAGES``);
    ``on_progress(host, message)`` hears a host's ``progress`` (its image pull) meanwhile."""
    ready: dict[int, dict[str, Any]] = {}
    pending = set(range(len(hosts)))
    while pending and not stopping():
        node, msg = next_event(deadline)
        if node is None:
            for n in pending:
                setup_errors.append(f"host {hosts[n].name}: no answer from its agent")
            break
        if node < 0 or node not in pending:
            continue
        host = hosts[node].name
        if msg["op"] == "ready":
            ready[node] = msg
            pending.discard(node)
        elif msg["op"] == "progress" and on_progress is not None:
            on_progress(host, msg)
        elif msg["op"] == "fatal":
            setup_errors.append(f"host {host}: {msg['stage']}: {msg['detail']}")
            if lasting is not None and msg["stage"] in LASTING_STAGES:
                lasting.append(setup_errors[-1])
            pending.discard(node)
        elif msg["op"] == "eof":
            stage, detail, fix = classify_failure(host, msg.get("stderr", ""))
            text = f"host {host}: {stage} failed: {detail}" + (f"\n    fix: {fix}" if fix else "")
            setup_errors.append(text)
            pending.discard(node)
    return ready


def node_facts(ready: dict[int, dict[str, Any]]) -> list[NodeFacts]:
    """What each host's agent said about it, in node order."""
    return [
        NodeFacts(
            cores=int(ready[n]["cores"]),
            rundir=ready[n]["rundir"],
            interface=ready[n].get("interface"),
            interface_address=ready[n].get("interface_address"),
            ring_ports=tuple(ready[n].get("ring_ports") or ()),
        )
        for n in range(len(ready))
    ]


def fresh_ports(
    links: list[AgentLink],
    hosts: list[Host],
    facts: list[NodeFacts],
    next_event: NextEvent,
    stopping: Callable[[], bool],
) -> tuple[int | None, list[NodeFacts]]:
    """A new rendezvous: node 0's master port, and every host's ring ports, picked now."""
    for link, host in zip(links, hosts, strict=True):
        link.send("port", ring_ports=host.slots)
    deadline = time.monotonic() + READY_TIMEOUT_S
    fresh = list(facts)
    master: int | None = None
    pending = set(range(len(links)))
    while pending:
        node, msg = next_event(deadline)
        if node is None or stopping() or msg["op"] == "eof":
            return None, facts
        if msg["op"] == "port" and node in pending:
            pending.discard(node)
            master = int(msg["port"]) if node == 0 else master
            ports = tuple(msg.get("ring_ports") or ())
            fresh[node] = dataclasses.replace(fresh[node], ring_ports=ports)
    return master, fresh

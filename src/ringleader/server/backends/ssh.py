"""The SSH backend: the local backend's detached supervisor, its agents started
on registered SSH nodes (DESIGN: one way to start a gang).

A gang the scheduler bound to SSH nodes runs as a detached supervisor here
whose launch has those nodes as its hosts (``gang_hosts``), so the
launcher's agents start there over SSH and their output comes back here.
A failed attempt is not restarted in place: it goes back to the server's
scheduler (``restarts_in_place=False``), which places the gang on nodes that
still answer.

Nomenclature:
- *node book*: where each SSH node is logged into (``ssh`` target) and the
  address other nodes reach it at; the server keeps it from its nodes table
  (``NodeBook.refresh``), so these SSH details stay on this path instead of
  travelling in every request.

Invariant: ``plan`` stays pure: it reads the book (memory), never the network.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ringleader.hosts import Host
from ringleader.launch.container_runtime import detected as detect_runtime
from ringleader.launch.detached import LaunchFile
from ringleader.launch.ssh import SSHOptions, ssh_argv
from ringleader.server import node_kinds
from ringleader.server.backends.base import (
    BackendContext,
    BackendRequest,
    Capabilities,
    PodPlacement,
)
from ringleader.server.backends.local import LocalBackend
from ringleader.server.backends.local.planning import LocalPod, Where

#: The runtime of a gang on SSH nodes when the head has none: each node's own.
NODES_OWN_RUNTIME = {"name": "podman", "path": "podman", "version": "each node's"}


@dataclass(frozen=True)
class SSHNode:
    target: str  # what ssh is given: user@host, or a name from ssh_config
    address: str  # what other nodes' ranks reach it at


class NodeBook:
    """SSH nodes by name, replaced whole whenever the inventory changes."""

    def __init__(self, nodes: Mapping[str, SSHNode] | None = None) -> None:
        self._nodes: Mapping[str, SSHNode] = dict(nodes or {})
        self._load: Callable[[], Mapping[str, SSHNode]] | None = None
        self._lock = threading.Lock()

    def load_with(self, load: Callable[[], Mapping[str, SSHNode]]) -> None:
        """Read the inventory with ``load`` from now on, starting now."""
        self._load = load
        self.refresh()

    def refresh(self) -> None:
        """Read the inventory again (the server calls this when nodes change)."""
        if self._load is not None:
            nodes = dict(self._load())
            with self._lock:
                self._nodes = nodes

    def get(self, name: str) -> SSHNode:
        with self._lock:
            found = self._nodes.get(name)
        return found or SSHNode(name, name)


def gang_hosts(
    pods: list[LocalPod], placements: Mapping[str, PodPlacement], book: NodeBook
) -> list[Host]:
    """The launch's hosts for a gang placed on SSH nodes: each pod's node in rank
    order, consecutive pods on one node as one host with their ranks as slots.

    A pod on this machine's own node (local or simulated) runs here; the
    supervisor then gives the others this machine's address toward them.
    """
    hosts: list[Host] = []
    for pod in pods:
        ranks = [r for r in pod.ranks if r >= 0]
        if not ranks:
            continue  # mpirun itself (the MPI launcher pod) runs here
        where = placements.get(pod.name)
        if where is not None and node_kinds.reached_by_ssh(where.node_kind):
            node = book.get(where.node)
            host = Host(node.target, node.address, len(ranks))
        else:
            host = Host("localhost", "127.0.0.1", len(ranks))
        if hosts and (hosts[-1].ssh, hosts[-1].address) == (host.ssh, host.address):
            host = Host(host.ssh, host.address, hosts.pop().slots + host.slots)
        hosts.append(host)
    return hosts


class SSHBackend(LocalBackend):
    """Gangs on SSH nodes (and this machine): agents over SSH, restarts by the scheduler."""

    name: ClassVar[str] = "ssh"
    capabilities: ClassVar[Capabilities] = Capabilities(
        multi_node=True, suspend=True, exec=True, restarts_in_place=False
    )

    def __init__(self, *, book: NodeBook | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.book = book or NodeBook()
        if self.runtime is None and "container_runtime" not in options:
            # Each node's agent runs its own (ready_image); the scheduler places image
            # pods only on nodes whose probe found one (sched.Node.runs_images).
            self.runtime = detect_runtime() or NODES_OWN_RUNTIME
            self.capabilities = dataclasses.replace(self.capabilities, container_images=True)

    @classmethod
    def configured(cls, context: BackendContext, arg: str = "") -> SSHBackend:
        cls.refuse_arg(arg)
        return cls(python=context.python, book=context.node_book, images=context.images)

    def where(self) -> Where:
        return Where(hosts=self._hosts, restarts_in_place=self.capabilities.restarts_in_place)

    def _hosts(self, pods: list[LocalPod], request: BackendRequest) -> list[Host]:
        return gang_hosts(pods, request.placements, self.book)

    def reach(self, launch: LaunchFile, pod: LocalPod) -> tuple[str, ...]:
        """ssh to the SSH node of ``pod`` (an image pod's session is ``podman exec``
        there, over the server's ssh config); () for a pod here."""
        host = _remote_host(launch, pod)
        return tuple(ssh_argv(host, "", SSHOptions.from_env())[:-1]) if host else ()


def _remote_host(launch: LaunchFile, pod: LocalPod) -> str:
    """The SSH host that runs ``pod``'s first rank ("" when that is this machine)."""
    host = _launch_host(launch, pod)
    return host if host in {h.name for h in launch.spec.hosts if not h.is_local} else ""


def _launch_host(launch: LaunchFile, pod: LocalPod) -> str:
    """The launch host that runs ``pod``'s first rank ("" for mpirun)."""
    rank = pod.ranks[0]
    for host in launch.spec.hosts:
        if 0 <= rank < host.slots:
            return host.name
        rank -= host.slots
    return ""

"""Test hosts: network namespaces on a bridge, each a machine with its own real sshd.

Why: the SSH path (ranks started on other machines, host keys checked, a host
vanishing mid-run) can only be trusted, and tried, against real sshd processes on
distinct addresses. Linux network namespaces give that on one machine, as root: the
tests build them (``tests/fixtures/testhosts.py``), and so does a user trying
multi-host on a laptop (``ringleader testhosts up 3``); both with this package.

Nomenclature (``<pid>``, ``<seq>`` in lowercase hex; ``<k>``, ``<i>`` in decimal):

* *tag*: one network. ``rlt<pid>-<seq>``: a test run's, made by process ``<pid>``
  and stale once it is dead; ``rlu<k>``: a user's, kept after its creator exits and
  owned by the claim file ``/run/ringleader-testhosts/rlu<k>`` (it names the
  directory holding the network's state, ``$RINGLEADER_HOME/testhosts``);
* bridge ``<tag>br`` in the root namespace, address ``10.77.<o>.1/24``;
* host ``i``: netns ``<tag>h<i>``, veth ``<tag>v<i>`` (bridge side) whose peer is
  ``eth0`` inside the netns, address ``10.77.<o>.<10+i>/24``, default route via the
  bridge, hostname its address (a UTS namespace), an sshd on port 22;
* ``10.77.<o>.254`` is in the subnet but never has a host (``unreachable_address``).

Modules: ``links`` (the kernel objects by name, recorded pids), ``sshd`` (the
daemons' and the client's configs), ``mounts`` (a host that lacks a directory or
has its own podman storage), ``network`` (``TestHostNetwork``: build, tear down),
``kept`` (a user's network: ``up``, ``down``, ``status`` and its state file).

Gloo inside the hosts needs ``GLOO_SOCKET_IFNAME=eth0``; ``ringleader launch`` picks
it (the interface that routes to the master).
"""

from ringleader.cluster.testhosts.links import TestHostError, cleanup_stale
from ringleader.cluster.testhosts.mounts import CONTAINER_DIRS, HIDE_TOOLS
from ringleader.cluster.testhosts.network import INTERFACE, TestHost, TestHostNetwork

__all__ = [
    "CONTAINER_DIRS",
    "HIDE_TOOLS",
    "INTERFACE",
    "TestHost",
    "TestHostError",
    "TestHostNetwork",
    "cleanup_stale",
]

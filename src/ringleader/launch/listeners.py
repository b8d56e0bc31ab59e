"""Who listens on a TCP port, as the kernel says: before a password goes to a port.

Why: the cluster registry (server/registry.py) is plain HTTP on a port any user
may bind while it is down, and every pod shares the host's network.  Asking the
port whether it answers would let a tenant's listener stand in for it, be sent
the registry's password by a root pull, or serve its own image to another
tenant's workload.  So a port is the registry's only when every listening socket
on it (``/proc/net/tcp``, ``tcp6``) is a descriptor of the registry's process.

Standard library only: the agent imports it (through ``containers``).
"""

from __future__ import annotations

import contextlib
import os

LISTEN = "0A"  # the TCP state of a listening socket in /proc/net/tcp


def listening_inodes(port: int, proc: str = "/proc") -> set[str]:
    """The socket inodes listening on ``port`` (any address, IPv4 or IPv6)."""
    found: set[str] = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(os.path.join(proc, "net", table)) as rows:
            next(rows, None)  # the header
            for row in rows:
                fields = row.split()
                if len(fields) < 10 or fields[3] != LISTEN:
                    continue
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(fields[9])
    return found


def owns_port(pid: int, port: int, proc: str = "/proc") -> bool:
    """Every socket listening on ``port`` is ``pid``'s (and there is one)."""
    inodes = listening_inodes(port, proc)
    if not inodes:
        return False
    held: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(os.path.join(proc, str(pid), "fd")):
            with contextlib.suppress(OSError):
                target = os.readlink(os.path.join(proc, str(pid), "fd", fd))
                if target.startswith("socket:["):
                    held.add(target[8:-1])
    return inodes <= held


def port_of(address: str) -> int:
    """The port of ``HOST:PORT`` (``[V6]:PORT`` too); 0 when it has none."""
    _, _, port = address.rpartition(":")
    return int(port) if port.isdigit() else 0

"""Which network interface a host uses toward the master, and a free port.

Why: gloo and NCCL pick an interface on their own and often pick wrong
(docker0, loopback, Wi-Fi instead of Thunderbolt), which hangs or slows
training.  The agent on each host asks the kernel's routing table which
interface reaches the master address, so every rank binds where its peers
can reach it.  The master host itself uses the interface that *holds* the
master address (a route to one's own address would say ``lo``).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys

LOOPBACK = "127.0.0.1"
_DEV = re.compile(r"\bdev\s+(\S+)")
_SRC = re.compile(r"\bsrc\s+(\S+)")


def _run(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def resolve(name: str) -> str | None:
    """An IPv4 address for a name (the form ip/gloo need), or None."""
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET)[0][4][0]
    except (OSError, IndexError):
        return None


def local_addresses() -> dict[str, str]:
    """This host's IPv4 addresses mapped to the interface that holds each."""
    found: dict[str, str] = {}
    for line in _run(["ip", "-o", "-4", "addr", "show"]).splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "inet":
            found[parts[3].split("/")[0]] = parts[1]
    return found


def interface_toward(target: str) -> tuple[str | None, str | None]:
    """(interface, source address) this host uses to reach ``target``."""
    address = resolve(target)
    if address is None:
        return None, None
    if address == LOOPBACK and os.path.exists("/sys/class/net/lo"):
        return "lo", LOOPBACK  # what `ip addr` says on Linux, without starting it
    own = local_addresses()
    if address in own:
        return own[address], address
    if sys.platform == "darwin":
        out = _run(["route", "-n", "get", address])
        match = re.search(r"interface:\s*(\S+)", out)
        return (match.group(1) if match else None), source_address_toward(address)
    out = _run(["ip", "-o", "route", "get", address])
    dev, src = _DEV.search(out), _SRC.search(out)
    return (dev.group(1) if dev else None), (src.group(1) if src else None)


def source_address_toward(target: str) -> str | None:
    """The local address a connection to ``target`` would come from."""
    address = resolve(target)
    if address is None:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect((address, 9))
            return sock.getsockname()[0]
        except OSError:
            return None


def interface_exists(name: str) -> bool:
    if os.path.isdir("/sys/class/net"):
        return os.path.exists(f"/sys/class/net/{name}")
    with contextlib.suppress(OSError):
        return name in {n for _, n in socket.if_nameindex()}
    return False


#: How many ports one agent picks at most (the ranks on one host; bounds a bad request).
MAX_PORTS = 4096


def free_port() -> int:
    """A TCP port nobody listens on now; the kernel picks it, never 29500 by habit."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports nobody listens on now, picked by the kernel.

    Every socket stays bound until all are picked, so no port comes back twice: ask
    for a master port and MLX's ring ports in one call, never in two.
    """
    count = max(0, min(int(count), MAX_PORTS))
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind(("", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def pick_ports(master: bool, ring_count: int) -> tuple[int | None, list[int]]:
    """A master port (when asked) and ``ring_count`` ports for MLX's ring, from one
    ``free_ports`` call, so the master port is never handed out as a ring port."""
    ports = free_ports(int(ring_count or 0) + (1 if master else 0))
    return (ports[0], ports[1:]) if master else (None, ports)


def for_gang(named: str | None, master_addr: str | None) -> tuple[str | None, str | None]:
    """The interface an agent's ranks talk on and its address: the one the launch
    names (LookupError when this host has none of that name), else the one routing
    toward the master, else (None, None)."""
    if named:
        if not interface_exists(named):
            raise LookupError(f"no interface {named!r}")
        return named, next((a for a, n in local_addresses().items() if n == named), None)
    if master_addr:
        return interface_toward(master_addr)
    return None, None

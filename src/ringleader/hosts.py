"""Host inventories: the formats users already have, read into ``list[Host]``.

Nomenclature:
- *host*: one machine that runs ranks. ``ssh`` is where to log in
  (``user@name`` or an address); ``address`` is what other ranks use to reach
  it (MLX ``ips[0]``; otherwise the ssh name without the user).
- *slots*: how many ranks the host runs.

Formats read:
- MPI / DeepSpeed / Horovod text hostfile: ``host slots=N`` per line,
  ``#`` comments and blank lines allowed (``max_slots=`` accepted, ignored).
- MLX ``hosts.json``: a list ``[{"ssh": ..., "ips": [...]}]`` or an object
  ``{"hosts": [...], ...}``.  One slot per host unless ``slots`` is given.
- Flag form ``-H a:2,b:2`` (Horovod).

Invariant: every parse error is an ``InvalidSpec`` whose ``where`` is
``file:line`` (or the flag), and nothing is half-returned.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
import socket
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ringleader.errors import InvalidSpec

_HOSTNAME = re.compile(r"^(?:[A-Za-z0-9_.-]+@)?(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])$")


def ssh_host(target: str) -> str:
    """The host part of an ssh target: ``user@gpu1`` -> ``gpu1``, ``[::1]`` -> ``::1``."""
    return target.rsplit("@", 1)[-1].strip("[]")


@dataclass(frozen=True)
class Host:
    """One machine of the gang and how many ranks it runs."""

    ssh: str
    address: str
    slots: int = 1

    @property
    def name(self) -> str:
        """Short name for prefixes and tables: the ssh target without the user."""
        return ssh_host(self.ssh)

    @property
    def is_local(self) -> bool:
        return is_local_address(self.name) and is_local_address(self.address)


def _check_name(name: str, where: str) -> str:
    if not name or not _HOSTNAME.match(name) or name.startswith("-"):
        raise InvalidSpec(f"invalid host name {name!r}", where)
    return name


def _check_slots(raw: object, where: str) -> int:
    try:
        slots = int(str(raw))
    except ValueError:
        raise InvalidSpec(f"slots must be a positive integer, got {raw!r}", where) from None
    if slots < 1:
        raise InvalidSpec(f"slots must be a positive integer, got {raw!r}", where)
    return slots


def _make_host(ssh: str, address: str | None, slots: int, where: str) -> Host:
    _check_name(ssh, where)
    address = address or ssh_host(ssh)
    _check_name(address, where)
    return Host(ssh=ssh, address=address, slots=slots)


def parse_mpi_hostfile(text: str, source: str = "hostfile") -> list[Host]:
    """Read ``host slots=N`` lines; every error names ``source:line``."""
    hosts: list[Host] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{lineno}"
        name, *fields = line.split()
        slots = 1
        for field in fields:
            key, sep, value = field.partition("=")
            if not sep:
                raise InvalidSpec(f"expected key=value after the host name, got {field!r}", where)
            if key in ("slots", "max_slots", "max-slots"):
                if key == "slots":
                    slots = _check_slots(value, where)
                else:
                    _check_slots(value, where)
            else:
                raise InvalidSpec(f"unknown field {key!r} (expected slots=N)", where)
        hosts.append(_make_host(name, None, slots, where))
    if not hosts:
        raise InvalidSpec("no hosts listed", source)
    return hosts


def _entry_lines(text: str, object_form: bool) -> list[int]:
    """Line number where each host object starts, so errors point at it."""
    start = text.find('"hosts"') if object_form else 0
    want = 2 if object_form else 1
    lines, depth, in_string, escaped = [], 0, False, False
    lineno = text.count("\n", 0, start) + 1
    for ch in text[start:]:
        if ch == "\n":
            lineno += 1
        if in_string:
            escaped = ch == "\\" and not escaped
            in_string = not (ch == '"' and not escaped)
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            if ch == "{" and depth == want - (1 if object_form else 0):
                lines.append(lineno)
            depth += 1
        elif ch in "]}":
            depth -= 1
    return lines


def parse_hosts_json(text: str, source: str = "hosts.json") -> list[Host]:
    """Read MLX's hosts.json: a list of hosts or ``{"hosts": [...]}``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSpec(
            f"invalid JSON: {exc.msg} (column {exc.colno})", f"{source}:{exc.lineno}"
        ) from None
    object_form = isinstance(data, dict)
    if isinstance(data, dict):
        if "hosts" not in data:
            raise InvalidSpec('expected a list of hosts or an object with "hosts"', f"{source}:1")
        data = data["hosts"]
    if not isinstance(data, list) or not data:
        raise InvalidSpec('"hosts" must be a non-empty list', f"{source}:1")
    hosts: list[Host] = []
    starts = _entry_lines(text, object_form)
    for index, entry in enumerate(data):
        line = starts[index] if index < len(starts) else 1
        where = f"{source}:{line} (host #{index + 1})"
        if not isinstance(entry, dict):
            raise InvalidSpec("each host must be an object", where)
        ssh = entry.get("ssh")
        if not isinstance(ssh, str) or not ssh:
            raise InvalidSpec('missing "ssh" (where to log in)', where)
        ips = entry.get("ips", [])
        if not isinstance(ips, list) or not all(isinstance(ip, str) for ip in ips):
            raise InvalidSpec('"ips" must be a list of addresses', where)
        slots = _check_slots(entry.get("slots", 1), where)
        hosts.append(_make_host(ssh, ips[0] if ips else None, slots, where))
    return hosts


def parse_host_list(flag: str) -> list[Host]:
    """Read Horovod's ``-H a:2,b:2`` (slots default to 1)."""
    hosts: list[Host] = []
    for index, item in enumerate(flag.split(","), start=1):
        item = item.strip()
        where = f"-H item {index} ({item!r})"
        if not item:
            raise InvalidSpec("empty host entry", where)
        name, sep, slots = item.rpartition(":")
        if not sep or name.endswith(":") or not name:
            name, slots = item, "1"
        hosts.append(_make_host(name, None, _check_slots(slots, where), where))
    return hosts


def load_hostfile(path: str | Path) -> list[Host]:
    """Read a hostfile of either kind; JSON when it looks like JSON."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InvalidSpec(f"cannot read hostfile: {exc.strerror}", str(path)) from None
    if path.suffix == ".json" or text.lstrip().startswith(("[", "{")):
        return parse_hosts_json(text, str(path))
    return parse_mpi_hostfile(text, str(path))


def required_paths(path: str | Path) -> list[str]:
    """A hosts.json's ``"require_paths"`` (its object form: ``{"hosts": [...],
    "require_paths": ["/opt/intel/oneapi"]}``): paths every host must have, which
    ``doctor`` checks; [] for a file without them (or an MPI hostfile)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []  # load_hostfile has said what is wrong with it
    if not isinstance(data, dict) or "require_paths" not in data:
        return []
    paths = data["require_paths"]
    if not isinstance(paths, list) or not all(
        isinstance(p, str) and p.startswith("/") for p in paths
    ):
        line = next((n for n, t in enumerate(path.read_text().splitlines(), 1)
                     if '"require_paths"' in t), 1)  # fmt: skip
        raise InvalidSpec('"require_paths" must be a list of absolute paths', f"{path}:{line}")
    return paths


def with_slots(hosts: list[Host], nproc_per_node: int | None) -> list[Host]:
    """Override every host's slots (``--nproc-per-node``)."""
    if nproc_per_node is None:
        return hosts
    if nproc_per_node < 1:
        raise InvalidSpec("must be at least 1", "--nproc-per-node")
    return [Host(h.ssh, h.address, nproc_per_node) for h in hosts]


def to_mpi_hostfile(hosts: list[Host]) -> str:
    """The MPI text form, one ``address slots=N`` line per machine.

    A machine listed several times (an MLX hosts.json naming one Mac once per rank)
    becomes one line with the slots added up, in first-seen order: OpenMPI refuses
    a hostfile that defines a host's slot count twice.
    """
    slots: dict[str, int] = {}
    for h in hosts:
        slots[h.address] = slots.get(h.address, 0) + h.slots
    return "".join(f"{address} slots={n}\n" for address, n in slots.items())


@lru_cache(maxsize=1)
def _local_names() -> frozenset[str]:
    names = {"localhost", socket.gethostname(), socket.getfqdn()}
    try:
        import subprocess

        out = subprocess.run(
            ["hostname", "-I"], capture_output=True, text=True, timeout=2, check=False
        ).stdout
        names.update(out.split())
    except (OSError, subprocess.SubprocessError):
        pass
    with contextlib.suppress(OSError):
        names.update(str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None))
    return frozenset(n.lower() for n in names if n)


def is_local_address(name: str) -> bool:
    """True for localhost, loopback addresses and this machine's own names/addresses."""
    name = name.strip("[]").lower()
    if name == "localhost":  # the default host: no need to ask the system for its names
        return True
    try:
        ip = ipaddress.ip_address(name)
        if ip.is_loopback:
            return True
    except ValueError:
        pass
    return name in _local_names()

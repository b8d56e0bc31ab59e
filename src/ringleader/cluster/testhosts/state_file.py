"""The record of a user's test hosts: ``state.json``, read as a file root alone wrote.

Why its own module: ``down`` acts on what this file says (which namespaces to delete,
which processes to signal), so every field is checked on read, and the file itself
is read without following a link, as a regular file of bounded size
(``paths.read_capped``); a record that is not one is a ``Conflict`` naming the file
and the field, never a crash or an act on a forged value.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ringleader.cluster.testhosts.links import USER_TAG_RE, ProcessId
from ringleader.cluster.testhosts.network import TestHostNetwork
from ringleader.cluster.testhosts.paths import MAX_STATE_BYTES, read_capped
from ringleader.errors import Conflict, Forbidden
from ringleader.home import write_private

MAX_HOSTS = 32  # each host is an sshd with its own keys: a laptop's worth
STATE_FILE = "state.json"
HOSTS_FILE = "hosts.json"
PHASES = ("creating", "up", "failed")  # failed: an ``up`` failed and could not undo all


def _bad_state(path: Path, problem: str) -> Conflict:
    return Conflict(
        f"{path} is not a test-hosts state file: {problem}\n  fix: check `ip netns list`"
        f" for rlu* namespaces, then remove {path.parent} by hand"
    )


def _int(value: object, low: int, high: int | None = None) -> int | None:
    """``value`` when it is an integer (not a bool) in [low, high], else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        return None
    return value if high is None or value <= high else None


def _process(value: object) -> ProcessId | None:
    if not isinstance(value, dict):
        return None
    pid, start = _int(value.get("pid"), 1), _int(value.get("start"), 0)
    return None if pid is None or start is None else ProcessId(pid, start)


def _checked(body: object) -> dict[str, object]:
    """The fields of a state file, each checked; ``ValueError`` naming the first bad
    one (``hosts[1].netns: ...``)."""
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    if body.get("version") != 1:
        raise ValueError(f"version: {body.get('version')!r}, not 1")
    tag = body.get("tag")
    if not isinstance(tag, str) or not USER_TAG_RE.match(tag):
        raise ValueError(f"tag: {tag!r} is not a user network's tag (rlu<k>)")
    n = _int(body.get("n"), 1, MAX_HOSTS)
    if n is None:
        raise ValueError(f"n: {body.get('n')!r} is not a host count (1..{MAX_HOSTS})")
    if body.get("phase") not in PHASES:
        raise ValueError(f"phase: {body.get('phase')!r}, not one of {', '.join(PHASES)}")
    creator = _process(body.get("creator"))
    if creator is None:
        raise ValueError(f"creator: {body.get('creator')!r} is not {{pid, start}}")
    created = body.get("created")
    try:
        datetime.fromisoformat(created)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"created: {created!r} is not an ISO date and time") from None
    bridge = body.get("bridge_address")
    if bridge is not None and not isinstance(bridge, str):
        raise ValueError(f"bridge_address: {bridge!r} is not an address")
    hosts = body.get("hosts")
    if not isinstance(hosts, list) or len(hosts) > n:
        raise ValueError(f"hosts: not a list of at most n={n} hosts")
    for i, h in enumerate(hosts):
        _check_host(f"hosts[{i}]", h, i, tag)
    return {"tag": tag, "n": n, "phase": body["phase"], "creator": creator,
            "created": created, "bridge_address": bridge, "hosts": hosts}  # fmt: skip


def _check_host(name: str, h: object, index: int, tag: str) -> None:
    if not isinstance(h, dict):
        raise ValueError(f"{name}: {h!r} is not a host")
    want: Mapping[str, object] = {
        "index": index, "netns": f"{tag}h{index}", "veth": f"{tag}v{index}"
    }  # fmt: skip
    for key, value in want.items():
        if h.get(key) != value or isinstance(h.get(key), bool):
            raise ValueError(f"{name}.{key}: {h.get(key)!r}, not {value!r}")
    if not isinstance(h.get("address"), str):
        raise ValueError(f"{name}.address: {h.get('address')!r} is not an address")
    if h.get("sshd") is not None and _process(h.get("sshd")) is None:
        raise ValueError(f"{name}.sshd: {h.get('sshd')!r} is not null or {{pid, start}}")


@dataclass
class Kept:
    """What ``state.json`` records of one user's network."""

    tag: str
    dir: Path
    n: int
    creator: ProcessId
    created: str
    phase: str = "creating"  # "creating" until every sshd answers, then "up"
    bridge_address: str | None = None
    hosts: list[dict[str, object]] = field(default_factory=list)

    @property
    def hosts_file(self) -> Path:
        return self.dir / HOSTS_FILE

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    def sshds(self) -> Iterator[tuple[int, ProcessId]]:
        """(host index, recorded sshd) of each host whose sshd was started."""
        for i, h in enumerate(self.hosts):
            sshd = _process(h.get("sshd"))
            if sshd is not None:
                yield i, sshd

    def write(self) -> None:
        body = {
            "version": 1, "tag": self.tag, "n": self.n, "phase": self.phase,
            "creator": {"pid": self.creator.pid, "start": self.creator.start},
            "created": self.created, "bridge_address": self.bridge_address,
            "hosts": self.hosts,
        }  # fmt: skip
        write_private(self.dir / STATE_FILE, json.dumps(body, indent=2) + "\n")

    @classmethod
    def read(cls, state_dir: Path) -> Kept | None:
        """The record in ``state_dir``, None when there is none.

        Read without following a link, only a regular file of at most
        ``MAX_STATE_BYTES``, every field checked: ``Conflict`` naming the file and the
        field otherwise; ``Forbidden`` when this user may not read it (it is root's).
        """
        path = state_dir / STATE_FILE
        try:
            body = _checked(json.loads(read_capped(path, MAX_STATE_BYTES)))
        except FileNotFoundError:
            return None
        except PermissionError:
            raise Forbidden(
                f"{path} cannot be read as this user (uid {os.geteuid()}): test hosts'"
                " state is root's\n  fix: run the command as root (sudo -i, then"
                " ringleader testhosts ...)"
            ) from None
        except OSError as exc:
            link = exc.errno == errno.ELOOP
            raise _bad_state(path, "it is a symbolic link" if link else str(exc)) from None
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise _bad_state(path, str(exc)) from None
        return cls(dir=state_dir, **body)  # type: ignore[arg-type]

    def recorded(self, net: TestHostNetwork) -> None:
        """Copy what ``net`` has made so far into the record, and write it."""
        self.bridge_address = net.bridge_address if net.subnet_octet else None
        self.hosts = [
            {"index": h.index, "netns": h.netns, "veth": h.veth, "address": h.address,
             "sshd": {"pid": h.sshd.pid, "start": h.sshd.start} if h.sshd else None}
            for h in net.hosts
        ]  # fmt: skip
        self.write()

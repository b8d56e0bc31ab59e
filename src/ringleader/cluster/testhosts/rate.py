"""Slow links for test hosts: a token-bucket rate (``tc qdisc ... tbf``) on each veth.

Why tbf, both ends: a host's traffic leaves through ``eth0`` inside its namespace
(its uplink) and arrives through the bridge-side veth ``<tag>v<i>`` (its downlink);
a qdisc shapes only what a device *sends*, so each end gets one, and a host then
sends and receives at most the rate, like a machine on a switch port of that
speed. ``netem`` (delay, loss) is not built into every kernel (not this one's);
tbf is, so test hosts emulate a link's bandwidth, not its latency.

Invariants:

* Only devices of our networks are touched: a bridge-side veth whose name matches
  a test-host tag (``links.TAG_RE``) and ``eth0`` inside that host's namespace.
* Setting a rate is ``tc qdisc replace`` (idempotent, changes a rate in place);
  ``None`` deletes our root qdisc, and a device without one is already clear. A
  deleted veth takes its qdisc along, so ``down`` leaves none behind.
* A failure part-way undoes the hosts already changed back to no rate, so a network
  is never left half-limited.

The rate a user's network has is recorded next to its ``state.json``
(``RATE_FILE``), so ``ringleader testhosts list`` can say it after ``up`` exits.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ringleader.cluster.testhosts.links import TAG_RE, Runner, TestHostError, run

INTERFACE = "eth0"  # the host side of each veth (``network.INTERFACE``)
RATE_FILE = "link_rate.json"
Completed = subprocess.CompletedProcess[str]
MIN_RATE = 8_000  # 1 KB/s: below this tbf's arithmetic (and any test) means nothing
MAX_RATE = 100 * 10**9
_UNITS = {
    "bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
    "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6, "gbps": 8 * 10**9,
}  # fmt: skip
_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]+)$")
RATE_HELP = "a number and a unit: 100mbit, 1gbit, 2.5gbit, 500kbit (bits/s), 10mbps (bytes/s)"


class Host(Protocol):
    """What a test host needs for a rate: its namespace and its bridge-side veth."""

    @property
    def netns(self) -> str: ...

    @property
    def veth(self) -> str: ...


@dataclass(frozen=True)
class Link:
    """A host of a user's network as ``state.json`` records it (``Kept.hosts``)."""

    netns: str
    veth: str


def kept_links(hosts: Iterable[dict[str, object]]) -> list[Link]:
    """The recorded hosts' links (``state_file`` has checked both names)."""
    return [Link(str(h["netns"]), str(h["veth"])) for h in hosts]


def parse_rate(text: str) -> int | None:
    """``100mbit`` -> 100_000_000 bits/s; ``none`` (or ``off``, ``0``) -> None.

    Units as tc reads them (decimal: ``mbit`` is 10**6 bits, ``mbps`` 10**6
    bytes). ``ValueError`` saying what is accepted otherwise.
    """
    lowered = text.strip().lower()
    if lowered in ("none", "off", "0", "unlimited"):
        return None
    match = _RATE_RE.match(lowered)
    if match is None or match.group(2) not in _UNITS:
        raise ValueError(f"{text!r} is not a rate: {RATE_HELP}, or none")
    bits = round(float(match.group(1)) * _UNITS[match.group(2)])
    if not MIN_RATE <= bits <= MAX_RATE:
        raise ValueError(f"{text!r} is out of range: 8kbit to 100gbit, or none")
    return bits


def rate_text(bits: int | None) -> str:
    """100_000_000 -> ``100mbit``, 2.5e9 -> ``2.5gbit`` (the largest unit it reaches,
    as ``parse_rate`` reads it back); None -> ``none``."""
    if bits is None:
        return "none"
    for unit, size in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bits >= size:
            return f"{bits / size:g}{unit}"
    return f"{bits}bit"


@dataclass(frozen=True)
class Bucket:
    """tbf's parameters for a rate, in bytes: why each, see ``bucket``."""

    rate: int  # bits/s
    burst: int
    limit: int

    def args(self) -> list[str]:
        return ["tbf", "rate", f"{self.rate}bit", "burst", str(self.burst),
                "limit", str(self.limit)]  # fmt: skip


def bucket(bits: int) -> Bucket:
    """tbf parameters that let TCP reach the rate, measured on this kernel.

    burst: 256 KiB or 4 ms of the rate, whichever is more (a veth hands tbf GSO
    segments of up to 64 KiB, and a bucket of one segment starves the timer); limit
    (the queue): 2 MiB or 100 ms of the rate. A queue of a few ms drops packets
    whenever a ring's flows line up, and TCP then halves its window: with 64 KiB and
    256 KiB, 8 ranks' all-reduce reached 45% of 250 Mbit; with these, 97%.
    """
    per_second = bits // 8
    burst = max(256 * 1024, per_second // 250)
    return Bucket(bits, burst, max(2 * 2**20, per_second // 10, 2 * burst))


def _check(host: Host) -> None:
    tag = host.veth.rsplit("v", 1)[0]
    if not TAG_RE.match(tag) or host.netns != f"{tag}h{host.veth.rsplit('v', 1)[1]}":
        raise ValueError(f"{host.netns}/{host.veth} are not a test host's namespace and veth")


End = tuple[tuple[str, ...], str]  # (``-n NETNS`` or nothing, device)


def _ends(host: Host) -> list[End]:
    """Both ends of the host's link: the veth here, ``eth0`` in its namespace."""
    return [((), host.veth), (("-n", host.netns), INTERFACE)]


def _tc(end: End, verb: str, *rest: str, runner: Runner, check: bool = True) -> Completed:
    """``tc [-n NETNS] qdisc VERB dev DEVICE REST...``."""
    netns, device = end
    return runner("tc", *netns, "qdisc", verb, "dev", device, *rest, check=check)


def _clear(host: Host, runner: Runner) -> list[str]:
    """Delete our root qdisc on both ends; errors other than "there was none"."""
    errors = []
    for end in _ends(host):
        if _shown(end, runner) is None:
            continue
        proc = _tc(end, "del", "root", runner=runner, check=False)
        if proc.returncode and _shown(end, runner) is not None:
            errors.append(proc.stderr.strip() or f"tc exited {proc.returncode}")
    return errors


def _shown(end: End, runner: Runner) -> int | None:
    """The rate of the tbf at the device's root, None when there is none."""
    proc = _tc(end, "show", runner=runner, check=False)
    for line in proc.stdout.splitlines():
        match = re.match(r"qdisc tbf \S+ root .*?\brate (\S+)", line)
        if match:
            return _tc_rate(match.group(1))
    return None


def _tc_rate(text: str) -> int:
    """tc's own rate display (``100Mbit``, ``1Gbit``, ``800Kbit``, ``8bit``) in bits/s."""
    match = re.match(r"^(\d+(?:\.\d+)?)([KMGT]?)bit$", text)
    if match is None:
        raise TestHostError(f"tc shows a rate it is not known to print: {text!r}")
    scale = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[match.group(2)]
    return round(float(match.group(1)) * scale)


def set_rate(hosts: Iterable[Host], bits: int | None, runner: Runner = run) -> list[str]:
    """Limit every host's link to ``bits``/s each way (None: no limit); what changed.

    The Python form of ``ringleader testhosts rate``, for tests and benches:
    ``set_rate(net.hosts, parse_rate("100mbit"))``. ``TestHostError`` when tc
    fails; the hosts changed before the failure are cleared first.
    """
    hosts = list(hosts)
    for host in hosts:
        _check(host)
    if bits is None:
        errors = [e for host in hosts for e in _clear(host, runner)]
        if errors:
            raise TestHostError("removing the link rate failed: " + "; ".join(errors))
        return [f"{h.veth} and {h.netns}:{INTERFACE}: no rate limit" for h in hosts]
    args = bucket(bits).args()
    done: list[Host] = []
    try:
        for host in hosts:
            done.append(host)
            for end in _ends(host):
                _tc(end, "replace", "root", *args, runner=runner)
    except (TestHostError, OSError) as exc:
        for host in done:
            _clear(host, runner)
        raise TestHostError(f"setting the link rate failed: {exc}") from None
    text = rate_text(bits)
    return [f"{h.veth} and {h.netns}:{INTERFACE}: tbf rate {text} each way" for h in hosts]


def rates(hosts: Sequence[Host], runner: Runner = run) -> list[tuple[int | None, int | None]]:
    """Each host's (downlink, uplink) rate as tc shows it now: veth's, eth0's."""
    return [(_shown(_ends(h)[0], runner), _shown(_ends(h)[1], runner)) for h in hosts]


def record(state_dir: Path, bits: int | None) -> None:
    """Write (or, for None, remove) the rate a user's network was given."""
    from ringleader.home import write_private

    path = state_dir / RATE_FILE
    if bits is None:
        path.unlink(missing_ok=True)
    else:
        write_private(path, json.dumps({"rate": bits, "text": rate_text(bits)}) + "\n")


def recorded(state_dir: Path) -> int | None:
    """The rate ``record`` wrote, None when none (or the file is not one of ours)."""
    from ringleader.cluster.testhosts.paths import read_capped

    try:
        value = json.loads(read_capped(state_dir / RATE_FILE, 4096)).get("rate")
    except (OSError, ValueError, AttributeError):
        return None
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= MIN_RATE
    return value if ok else None

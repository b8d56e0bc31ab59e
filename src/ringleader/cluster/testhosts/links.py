"""The kernel objects of test-host networks, found and removed by name.

Why by name: whoever removes a network may not be the process that made it (a
``ringleader testhosts down`` after the ``up`` is long gone, a test run after a
crashed one), so every object carries its network's *tag* in its name and is
found again by listing the machine's namespaces and links.

Nomenclature (see the package docstring for the whole scheme):

* a *tag* names one network: ``rlt<pid>-<seq>`` (hex) for a test run's, stale once
  that pid is dead; ``rlu<k>`` (decimal) for one a user made with ``up``, owned by
  the claim file ``/run/ringleader-testhosts/rlu<k>`` that names its state directory;
* a tag's objects: the bridge ``<tag>br``, veths ``<tag>v<i>`` and namespaces
  ``<tag>h<i>``.

Invariants: nothing here signals a process it cannot tie to a network of ours: a
recorded pid only while its start time is the one recorded, and otherwise only the
processes the kernel lists inside one of our namespaces (``ip netns pids``); nothing
here deletes an object whose tag is not one of the two forms above (``TAG_RE``), so
no tag matches another program's names (a tag ``et`` would match ``eth0``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ringleader.cluster.testhosts.paths import is_ours

SUBNET_PREFIX = "10.77"
SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/local/sbin"])
LOCK_FILE = Path("/run/ringleader-testhosts.lock")
CLAIMS_DIR = Path("/run/ringleader-testhosts")
TEST_TAG_RE = re.compile(r"^rlt([0-9a-f]+)-([0-9a-f]+)(?:br|h\d+|v\d+|-net)$")
USER_TAG_PREFIX = "rlu"
USER_TAG_RE = re.compile(r"^rlu\d{1,6}$")
TAG_RE = re.compile(r"^(?:rlu\d{1,6}|rlt[0-9a-f]{1,8}-[0-9a-f]{1,2})$")

Runner = Callable[..., subprocess.CompletedProcess[str]]


class TestHostError(RuntimeError):
    """A test-host command failed; the message carries the command and its stderr."""

    __test__ = False  # not a pytest test class despite the name


def run(*argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run a setup/teardown command; raise with its stderr so failures are diagnosable."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise TestHostError(f"{shlex.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def pid_alive(pid: int) -> bool:
    """True unless the pid is gone or a zombie (pid 1 in containers may never reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def start_time(pid: int) -> int | None:
    """The pid's start time (clock ticks after boot, /proc's field 22), None when gone.

    A pid and its start time name one process for good: a reused pid starts later.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


@dataclass(frozen=True)
class ProcessId:
    """A process as recorded when we started it: its pid and its start time."""

    pid: int
    start: int

    @classmethod
    def of(cls, pid: int) -> ProcessId | None:
        started = start_time(pid)
        return None if started is None else cls(pid, started)

    def alive(self) -> bool:
        """Still the very process we recorded, and not a zombie."""
        return start_time(self.pid) == self.start and pid_alive(self.pid)


def stop(process: ProcessId, grace: float = 5.0) -> bool:
    """SIGTERM the recorded process, SIGKILL after ``grace``; True if it was running.

    Each signal goes only after /proc says the pid is still the recorded process.
    """
    if not process.alive():
        return False
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        if not process.alive():
            break
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, sig)
        deadline = time.monotonic() + wait
        while process.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
    return True


def delete_link(name: str, runner: Runner = run) -> list[str]:
    """Delete a root-ns link; a link that vanished meanwhile (netns cleanup) is fine."""
    if not Path(f"/sys/class/net/{name}").exists():
        return []
    proc = runner("ip", "link", "del", name, check=False)
    return [proc.stderr.strip()] if proc.returncode and "Cannot find" not in proc.stderr else []


def in_netns(pid: int, netns: str) -> bool:
    """Whether the process runs in the named namespace (as ``ip netns identify`` tells)."""
    try:
        mine, named = os.stat(f"/proc/{pid}/ns/net"), os.stat(f"/run/netns/{netns}")
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (named.st_dev, named.st_ino)


def netns_pids(netns: str, runner: Runner = run) -> list[int]:
    """Live processes inside the namespace, as the kernel lists them."""
    out = runner("ip", "netns", "pids", netns, check=False).stdout.split()
    return [p for p in map(int, out) if pid_alive(p)]


def delete_netns(netns: str, veth: str | None = None, runner: Runner = run) -> list[str]:
    """Kill every process left in our namespace (e.g. ssh sessions), then delete it.

    The veth goes first: deleting it is synchronous and takes ``eth0`` along, whereas a
    deleted namespace releases its devices later, from a kernel work queue.
    """
    errors = delete_link(veth, runner) if veth else []
    if not Path(f"/run/netns/{netns}").exists():
        return errors
    deadline = time.monotonic() + 10
    while (pids := netns_pids(netns, runner)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    proc = runner("ip", "netns", "del", netns, check=False)
    return errors + ([proc.stderr.strip()] if proc.returncode else [])


def all_netns(runner: Runner = run) -> list[str]:
    """Every named network namespace of the machine."""
    out = runner("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def all_links() -> list[str]:
    """Every link of the root network namespace."""
    return sorted(os.listdir("/sys/class/net"))


def tag_pattern(tag: str) -> re.Pattern[str]:
    """Names of the tag's objects: ``<tag>br``, ``<tag>v<i>``, ``<tag>h<i>``."""
    return re.compile(rf"^{re.escape(tag)}(?:br|h\d+|v\d+)$")


def tag_objects(tag: str, runner: Runner = run) -> tuple[list[str], list[str]]:
    """(namespaces, links) that carry the tag, as they exist now."""
    pattern = tag_pattern(tag)
    netns = [n for n in all_netns(runner) if pattern.match(n)]
    return netns, [link for link in all_links() if pattern.match(link)]


def remove_tag(tag: str, runner: Runner = run) -> tuple[list[str], list[str]]:
    """Delete every namespace and link of the tag (veths before the bridge).

    Returns (what was deleted, one phrase each; errors). Works on a half-built network.
    Raises ``ValueError`` for a tag of neither form (``TAG_RE``).
    """
    if not TAG_RE.match(tag):
        raise ValueError(f"{tag!r} is not a test-host tag (rlu<k> or rlt<pid>-<seq>)")
    netns, links = tag_objects(tag, runner)
    deleted: list[str] = []
    errors: list[str] = []
    for name in sorted(netns, key=_index):
        veth = f"{tag}v{_index(name)}"
        if inside := netns_pids(name, runner):
            deleted.append(f"{len(inside)} processes left in {name} (logins, ranks): killed")
        errors += delete_netns(name, veth, runner)
        deleted.append(f"netns {name}" + (f" and veth {veth}" if veth in links else ""))
    for link in sorted(links, reverse=True):  # veths (v...) before the bridge (br)
        if Path(f"/sys/class/net/{link}").exists():
            errors += delete_link(link, runner)
            deleted.append(f"{'bridge' if link.endswith('br') else 'veth'} {link}")
    return deleted, errors


def _index(name: str) -> int:
    digits = re.search(r"(\d+)$", name)
    return int(digits.group(1)) if digits else -1


def cleanup_stale(runner: Runner = run, tmp: Path | None = None) -> None:
    """Remove namespaces, links and temp dirs of test runs whose process is dead.

    Only ``rlt`` tags: a user's ``rlu`` network outlives its creator on purpose.
    """

    def dead(name: str) -> bool:
        m = TEST_TAG_RE.match(name)
        return m is not None and not pid_alive(int(m.group(1), 16))

    for netns in all_netns(runner):
        if dead(netns):
            delete_netns(netns, runner=runner)
    for link in sorted(all_links(), reverse=True):  # veths before bridges
        if dead(link):
            delete_link(link, runner)
    for path in Path(tmp or tempfile.gettempdir()).glob("rlt*-net"):
        if dead(path.name) and is_ours(path):  # never one another user made there
            shutil.rmtree(path, ignore_errors=True)


def free_octet(runner: Runner = run) -> int:
    """Pick k so that 10.77.k.0/24 appears in no root-ns address or route."""
    text = runner("ip", "-o", "-4", "addr", "show").stdout + runner("ip", "-4", "route").stdout
    used = {int(k) for k in re.findall(rf"\b{re.escape(SUBNET_PREFIX)}\.(\d+)\.", text)}
    start = os.getpid() % 254
    for k in ((start + j) % 254 + 1 for j in range(254)):
        if k not in used:
            return k
    raise TestHostError(f"no free /24 left in {SUBNET_PREFIX}.0.0/16")


def missing_prerequisites(runner: Runner = run) -> tuple[str, ...]:
    """Reasons test hosts cannot be built here (empty when they can)."""
    missing = [] if os.geteuid() == 0 else ["not running as root"]
    for tool in ("ip", "sshd", "ssh", "ssh-keygen", "unshare", "mount"):
        if shutil.which(tool, path=SBIN_PATH) is None:
            missing.append(f"no `{tool}` binary (iproute2 / openssh-server / util-linux)")
    if not missing and runner("unshare", "--net", "true", check=False).returncode != 0:
        missing.append("cannot create network namespaces (`unshare --net true` failed)")
    return tuple(missing)

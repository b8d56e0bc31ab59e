"""A user's test hosts (``ringleader testhosts up/down/list``): kept after ``up`` exits.

Why a state file: ``down`` runs in another process, maybe after ``up`` was killed
midway, so everything it must undo is written down before it exists, and found again
by name. The *state directory* is ``$RINGLEADER_HOME/testhosts``: ``up`` writes every
file there (``state.json`` first, then keys, configs, ``hosts.json``) and ``down``
removes the directory whole.

Invariants:

* ``state.json`` names the tag before any kernel object of it exists, and each
  sshd's pid and start time as soon as it runs (rewritten whole, by rename);
* a tag ``rlu<k>`` is taken only with its claim file, created exclusively under the
  machine's test-host lock when no claim and no namespace or link of it exists; so
  homes (a user's, each test's) never share a tag, and a test run's ``rlt`` cleanup
  never matches it;
* ``down`` deletes a tag's namespaces and links only while the claim names its own
  state directory (or no claim is left), signals a recorded pid only while /proc
  shows the recorded start time, and says what is left if anything is;
* ``up`` is all or nothing: a failure (or Ctrl-C) removes what it had made.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ringleader.cluster.testhosts.links import (
    CLAIMS_DIR,
    LOCK_FILE,
    USER_TAG_PREFIX,
    ProcessId,
    Runner,
    missing_prerequisites,
    remove_tag,
    run,
    stop,
    tag_objects,
)
from ringleader.cluster.testhosts.network import TestHostNetwork
from ringleader.errors import Conflict, InvalidSpec, RingleaderError
from ringleader.home import write_private

MAX_HOSTS = 32  # each host is an sshd with its own keys: a laptop's worth
STATE_FILE = "state.json"
HOSTS_FILE = "hosts.json"
MAX_TAGS = 1000
Say = Callable[[str], None]


class NotRoot(InvalidSpec):
    """Namespaces, veths and sshd on port 22 need root."""

    def __init__(self, command: str, args: str = "") -> None:
        super().__init__(
            f"`ringleader testhosts {command}` needs root: it creates and removes network"
            " namespaces, veths, a bridge and sshd processes\n  fix: run it as root:"
            f" sudo ringleader testhosts {command}{args} (or in a root shell, sudo -i)"
        )


class SetupFailed(RingleaderError):
    """Test hosts could not be made (or removed) here; the message says why."""


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
        for h in self.hosts:
            sshd = h.get("sshd")
            if isinstance(sshd, dict):
                yield int(str(h["index"])), ProcessId(int(sshd["pid"]), int(sshd["start"]))

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
        """The record in ``state_dir``, None when there is none."""
        path = state_dir / STATE_FILE
        try:
            body = json.loads(path.read_text())
            creator = ProcessId(int(body["creator"]["pid"]), int(body["creator"]["start"]))
            return cls(
                tag=str(body["tag"]), dir=state_dir, n=int(body["n"]), creator=creator,
                created=str(body["created"]), phase=str(body["phase"]),
                bridge_address=body.get("bridge_address"), hosts=list(body["hosts"]),
            )  # fmt: skip
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise Conflict(
                f"{path} is not a test-hosts state file ({exc})\n  fix: check `ip netns list`"
                f" for rlu* namespaces, then remove {path.parent} by hand"
            ) from None

    def recorded(self, net: TestHostNetwork) -> None:
        """Copy what ``net`` has made so far into the record, and write it."""
        self.bridge_address = net.bridge_address if net.subnet_octet else None
        self.hosts = [
            {"index": h.index, "netns": h.netns, "veth": h.veth, "address": h.address,
             "sshd": {"pid": h.sshd.pid, "start": h.sshd.start} if h.sshd else None}
            for h in net.hosts
        ]  # fmt: skip
        self.write()


def state_dir(home: Path) -> Path:
    """Where ``up`` writes everything and ``down`` looks: ``<home>/testhosts``."""
    return home.absolute() / "testhosts"


def claim_file(tag: str) -> Path:
    return CLAIMS_DIR / tag


def claimed_by(tag: str) -> Path | None:
    """The state directory the tag's claim names, None without a claim."""
    with contextlib.suppress(OSError):
        return Path(claim_file(tag).read_text().strip())
    return None


def _claims() -> list[tuple[str, Path]]:
    """(tag, state directory) of every claim on this machine."""
    if not CLAIMS_DIR.is_dir():
        return []
    found = []
    for path in sorted(CLAIMS_DIR.iterdir()):
        owner = claimed_by(path.name)
        if owner is not None:
            found.append((path.name, owner))
    return found


def other_networks(mine: Path) -> list[tuple[str, Path]]:
    """(tag, state directory) of every user network on this machine but ``mine``'s."""
    return [(tag, owner) for tag, owner in _claims() if owner != mine]


def check_count(n: int) -> None:
    """``up``'s N: a host at least, and no more than a laptop runs comfortably."""
    if not 1 <= n <= MAX_HOSTS:
        raise InvalidSpec(f"must be between 1 and {MAX_HOSTS} hosts, got {n}", "N")


def require_root(command: str, args: str = "") -> None:
    if os.geteuid() != 0:
        raise NotRoot(command, args)


@contextlib.contextmanager
def _machine_lock() -> Iterator[None]:
    """The lock every test-host network takes to pick its tag, subnet and bridge."""
    LOCK_FILE.touch(exist_ok=True)
    with LOCK_FILE.open() as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _refuse_existing(found: Kept) -> Conflict:
    """Why ``up`` will not make another network in a home that has one."""
    where = f"(state in {found.dir})"
    if found.phase == "creating" and found.creator.alive():
        return Conflict(
            f"another `ringleader testhosts up` (pid {found.creator.pid}) is making test"
            f" hosts {found.tag} now {where}\n  fix: wait for it, or stop it (Ctrl-C undoes"
            " what it made)"
        )
    if found.phase == "creating":
        return Conflict(
            f"an earlier `ringleader testhosts up` was stopped midway and left test hosts"
            f" {found.tag} half-made {where}\n  fix: `ringleader testhosts down` removes them"
        )
    if not any(sshd.alive() for _, sshd in found.sshds()):
        return Conflict(
            f"test hosts {found.tag} were made here but none of their sshds runs (a reboot?)"
            f" {where}\n  fix: `ringleader testhosts down` removes what is left of them"
        )
    return Conflict(
        f"test hosts {found.tag} are already up: {found.n} hosts, hosts file"
        f" {found.hosts_file}\n  fix: use them, or `ringleader testhosts down` first"
    )


def _claim_tag(directory: Path, runner: Runner) -> str:
    """Take the first free ``rlu<k>`` (call under the machine lock)."""
    CLAIMS_DIR.mkdir(mode=0o755, exist_ok=True)
    for k in range(MAX_TAGS):
        tag = f"{USER_TAG_PREFIX}{k}"
        if claim_file(tag).exists() or any(tag_objects(tag, runner)):
            continue
        fd = os.open(claim_file(tag), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"{directory}\n")
        return tag
    raise SetupFailed(f"every tag {USER_TAG_PREFIX}0..{MAX_TAGS - 1} is taken on this machine")


def up(n: int, home: Path, say: Say, runner: Runner = run) -> Kept:
    """Make ``n`` test hosts for ``home`` and leave them running; say each change.

    Raises ``NotRoot``, ``InvalidSpec`` (n), ``Conflict`` (one is up, or the state
    directory holds other files) or ``SetupFailed``; on any failure nothing is left.
    """
    check_count(n)
    require_root("up", f" {n}")
    missing = missing_prerequisites(runner)
    if missing:
        raise SetupFailed(
            "test hosts cannot be made here: " + "; ".join(missing) + "\n  fix: install"
            " iproute2, openssh-server, openssh-client and util-linux (apt-get install ...)"
        )
    directory = state_dir(home)
    with _machine_lock():
        found = Kept.read(directory)
        if found is not None:
            raise _refuse_existing(found)
        if directory.is_dir() and any(directory.iterdir()):
            raise Conflict(
                f"{directory} holds files that `ringleader testhosts up` did not write"
                "\n  fix: move them away, or set RINGLEADER_HOME to another directory"
            )
        tag = _claim_tag(directory, runner)
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            creator = ProcessId.of(os.getpid())
            assert creator is not None  # this very process
            kept = Kept(tag, directory, n, creator, datetime.now(timezone.utc).isoformat())
            kept.write()
        except BaseException:
            claim_file(tag).unlink(missing_ok=True)
            raise
    say(f"tag {tag}, claimed by {claim_file(tag)}")
    say(f"state: {directory / STATE_FILE}")

    def changed(line: str) -> None:
        kept.recorded(net)
        say(line)

    net = TestHostNetwork(n, tag=tag, dir=directory, runner=runner, progress=changed)
    try:
        net.start()  # on failure it has torn down what it made, files included
    except BaseException as exc:
        claim_file(tag).unlink(missing_ok=True)
        left = _leftovers(kept, runner)
        if left:
            say(f"could not undo: {', '.join(left)}")
        else:
            say(f"undone: every namespace, link and sshd above, {directory} and the claim")
        if isinstance(exc, Exception):
            gone = "; nothing of them is left" if not left else ""
            raise SetupFailed(f"making the test hosts failed: {exc}{gone}") from None
        raise
    net.detach()
    hosts = [{"ssh": h.address, "ips": [h.address]} for h in net.hosts]
    (directory / HOSTS_FILE).write_text(json.dumps(hosts, indent=2) + "\n")
    kept.phase = "up"
    kept.recorded(net)
    return kept


def _leftovers(kept: Kept, runner: Runner, objects: bool = True) -> list[str]:
    """What of the network still exists: its namespaces and links, its sshds."""
    left = [name for names in tag_objects(kept.tag, runner) for name in names] if objects else []
    return left + [f"sshd pid {p.pid}" for _, p in kept.sshds() if p.alive()]


def _unrecorded(directory: Path, say: Say, runner: Runner) -> bool:
    """Remove the networks claimed for ``directory`` whose state file is gone (the home
    was deleted while they were up); True if there was one. Their sshds run inside
    their namespaces, so deleting those ends them."""
    tags = [tag for tag, owner in _claims() if owner == directory]
    for tag in tags:
        say(f"{directory / STATE_FILE} is gone, but {claim_file(tag)} names it")
        deleted, errors = remove_tag(tag, runner)
        for line in deleted:
            say(line if line.endswith("killed") else f"deleted {line}")
        claim_file(tag).unlink(missing_ok=True)
        say(f"removed {claim_file(tag)}")
        left = [name for names in tag_objects(tag, runner) for name in names]
        if errors or left:
            raise SetupFailed(f"test hosts {tag} are not all gone: {', '.join(errors + left)}")
    return bool(tags)


def down(home: Path, say: Say, runner: Runner = run) -> bool:
    """Remove everything ``up`` made for ``home``; False when it had made nothing.

    Safe to run again, and after the ``up`` that made them was killed.
    """
    require_root("down")
    directory = state_dir(home)
    kept = Kept.read(directory)
    if kept is None:
        return _unrecorded(directory, say, runner)
    if kept.phase == "creating" and kept.creator.alive():
        raise _refuse_existing(kept)
    owner = claimed_by(kept.tag)
    ours = owner is None or owner == directory
    if ours:
        for index, sshd in kept.sshds():
            if stop(sshd):
                say(f"stopped sshd pid {sshd.pid} (host {index})")
        deleted, errors = remove_tag(kept.tag, runner)
        for line in deleted:
            say(line if line.endswith("killed") else f"deleted {line}")
    else:
        errors = []
        say(f"tag {kept.tag} now belongs to {owner}: its namespaces and links are left alone")
    shutil.rmtree(directory, ignore_errors=True)
    say(f"removed {directory} (state, hosts.json, ssh_config, keys, sshd logs)")
    if ours and owner is not None:
        claim_file(kept.tag).unlink(missing_ok=True)
        say(f"removed {claim_file(kept.tag)}")
    left = _leftovers(kept, runner, objects=ours) + [str(directory)] * directory.exists()
    if errors or left:
        raise SetupFailed(f"test hosts {kept.tag} are not all gone: {', '.join(errors + left)}")
    return True


@dataclass(frozen=True)
class HostState:
    """One host of a kept network as it is now."""

    index: int
    address: str
    netns: str
    sshd_pid: int | None  # the recorded pid, None when none was started
    sshd_running: bool
    answers: bool


def host_states(kept: Kept) -> list[HostState]:
    """Each recorded host: is its namespace there, its sshd running and answering."""
    from ringleader.cluster.testhosts.sshd import answers

    running = dict(kept.sshds())
    states = []
    for h in kept.hosts:
        index, address = int(str(h["index"])), str(h["address"])
        sshd = running.get(index)
        alive = sshd is not None and sshd.alive()
        listening = alive and bool(address) and answers(address)
        pid = sshd.pid if sshd else None
        states.append(HostState(index, address, str(h["netns"]), pid, alive, listening))
    return states

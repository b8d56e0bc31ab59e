"""A user's test hosts (``ringleader testhosts up/down/list``): kept after ``up`` exits.

Why a state file: ``down`` runs in another process, maybe after ``up`` was killed
midway, so everything it must undo is written down before it exists, and found again
by name. The *state directory* is ``$RINGLEADER_HOME/testhosts``: ``up`` writes every
file there (``state.json`` first, then keys, configs, ``hosts.json``) and ``down``
removes the directory whole; where it is, its checks and its making are
``state_directory``'s.

Invariants:

* ``state.json`` names the tag before any kernel object of it exists, and each
  sshd's pid and start time as soon as it runs (rewritten whole, by rename);
* a tag ``rlu<k>`` is taken only with its claim file, created exclusively under the
  machine's test-host lock when no claim and no namespace or link of it exists; so
  homes (a user's, each test's) never share a tag, and a test run's ``rlt`` cleanup
  never matches it;
* the state directory and every directory above it can be changed by root alone
  (``paths``), else ``up`` and ``down`` refuse before writing or acting on anything;
  the directory is made exclusively, so only root writes ``state.json``, and it is
  read without following links, as a regular file of bounded size, whose every
  field is checked (a tag ``rlu<k>``, the names its hosts' must have);
* ``down`` deletes a tag's namespaces and links, and signals recorded sshds, only
  while the claim names its own state directory; an sshd only while /proc shows the
  recorded start time *and* it runs in that host's namespace; it says what is left
  if anything is, and then keeps the state and the claim, so that it can retry;
* ``up`` is all or nothing: a failure (or Ctrl-C) removes what it had made, or, when
  something cannot be removed, keeps the state and the claim for ``down``;
* ``down`` removes only ``<home>/testhosts`` itself, never a path read from a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ringleader.cluster.testhosts.links import (
    CLAIMS_DIR,
    LOCK_FILE,
    USER_TAG_PREFIX,
    USER_TAG_RE,
    ProcessId,
    Runner,
    in_netns,
    missing_prerequisites,
    remove_tag,
    run,
    stop,
    tag_objects,
)
from ringleader.cluster.testhosts.network import TestHostNetwork
from ringleader.cluster.testhosts.sshd import check_quotable
from ringleader.cluster.testhosts.state_directory import (
    UnsafeHome as UnsafeHome,  # re-exported: up's and down's refusal of an unsafe home
)
from ringleader.cluster.testhosts.state_directory import check_safe, make_state_dir, state_dir
from ringleader.cluster.testhosts.state_file import (
    HOSTS_FILE,
    MAX_HOSTS,
    STATE_FILE,
    Kept,
)
from ringleader.errors import Conflict, InvalidSpec, RingleaderError

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
    if found.phase == "failed":
        return Conflict(
            f"an earlier `ringleader testhosts up` failed and could not remove all of test"
            f" hosts {found.tag} {where}\n  fix: `ringleader testhosts down` removes the rest"
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

    Raises ``NotRoot``, ``InvalidSpec`` (n; ``UnsafeHome``: a home other users can
    change), ``Conflict`` (one is up, or the state directory holds other files) or
    ``SetupFailed``; on any failure nothing is left, or, when something cannot be
    removed, its state and claim stay for ``down``.
    """
    check_count(n)
    require_root("up", f" {n}")
    directory = state_dir(home)
    try:
        check_quotable(directory)
    except ValueError as exc:
        raise InvalidSpec(f"{exc}\n  fix: use a home without it", "RINGLEADER_HOME") from None
    check_safe(directory)  # before anything is made or read there
    missing = missing_prerequisites(runner)
    if missing:
        raise SetupFailed(
            "test hosts cannot be made here: " + "; ".join(missing) + "\n  fix: install"
            " iproute2, openssh-server, openssh-client and util-linux (apt-get install ...)"
        )
    with _machine_lock():
        found = Kept.read(directory)
        if found is not None:
            raise _refuse_existing(found)
        make_state_dir(directory)
        tag = None
        try:
            tag = _claim_tag(directory, runner)
            creator = ProcessId.of(os.getpid())
            assert creator is not None  # this very process
            kept = Kept(tag, directory, n, creator, datetime.now(timezone.utc).isoformat())
            kept.write()
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)  # made above, exclusively
            if tag is not None:
                claim_file(tag).unlink(missing_ok=True)
            raise
    say(f"tag {tag}, claimed by {claim_file(tag)}")
    say(f"state: {directory / STATE_FILE}")

    def changed(line: str) -> None:
        kept.recorded(net)
        say(line)

    net = TestHostNetwork(n, tag=tag, dir=directory, runner=runner, progress=changed)
    try:
        net.start()  # on failure it has torn down what it could
    except BaseException as exc:
        left = _leftovers(tag, [h.sshd for h in net.hosts if h.sshd], runner)
        if left:  # state and claim stay: `down` retries from them
            kept.phase = "failed"
            kept.recorded(net)
            say(f"could not undo: {', '.join(left)}; `ringleader testhosts down` retries")
        else:
            shutil.rmtree(directory, ignore_errors=True)
            claim_file(tag).unlink(missing_ok=True)
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


def _leftovers(tag: str, sshds: list[ProcessId], runner: Runner) -> list[str]:
    """What of the network still exists: its namespaces and links, the given sshds."""
    left = [name for names in tag_objects(tag, runner) for name in names]
    return left + [f"sshd pid {p.pid}" for p in sshds if p.alive()]


def _not_all_gone(tag: str, errors: list[str], left: list[str]) -> SetupFailed:
    return SetupFailed(
        f"test hosts {tag} are not all gone: {', '.join(errors + left)}\n  fix: run"
        " `ringleader testhosts down` again (its state and claim are kept for it)"
    )


def _said(deleted: list[str], say: Say) -> None:
    for line in deleted:
        say(line if line.endswith("killed") else f"deleted {line}")


def _unrecorded(directory: Path, say: Say, runner: Runner) -> bool:
    """Remove the networks claimed for ``directory`` whose state file is gone (the home
    was deleted while they were up); True if there was one. Their sshds run inside
    their namespaces, so deleting those ends them."""
    tags = [tag for tag, owner in _claims() if owner == directory]
    for tag in tags:
        if not USER_TAG_RE.match(tag):
            continue  # not a claim `up` makes
        say(f"{directory / STATE_FILE} is gone, but {claim_file(tag)} names it")
        deleted, errors = remove_tag(tag, runner)
        _said(deleted, say)
        left = _leftovers(tag, [], runner)
        if errors or left:  # the claim stays, for the next `down`
            raise _not_all_gone(tag, errors, left)
        claim_file(tag).unlink(missing_ok=True)
        say(f"removed {claim_file(tag)}")
    return bool(tags)


def down(home: Path, say: Say, runner: Runner = run) -> bool:
    """Remove everything ``up`` made for ``home``; False when it had made nothing.

    Safe to run again, and after the ``up`` that made them was killed. Raises
    ``UnsafeHome`` (the state directory can be changed by others), ``Conflict`` (a
    state file that is not one, an ``up`` still making them) or ``SetupFailed`` (not
    all gone: the state and claim stay, to run it again).
    """
    require_root("down")
    directory = state_dir(home)
    if os.path.lexists(directory):
        check_safe(directory)  # what it reads there decides what root kills
    kept = Kept.read(directory)
    if kept is None:
        return _unrecorded(directory, say, runner)
    if kept.phase == "creating" and kept.creator.alive():
        raise _refuse_existing(kept)
    owner = claimed_by(kept.tag)
    ours = owner == directory
    errors: list[str] = []
    sshds: list[ProcessId] = []
    if ours:
        for index, sshd in kept.sshds():  # only while it is that very host's sshd
            if in_netns(sshd.pid, f"{kept.tag}h{index}") and sshd.alive():
                sshds.append(sshd)
                if stop(sshd):
                    say(f"stopped sshd pid {sshd.pid} (host {index})")
        deleted, errors = remove_tag(kept.tag, runner)
        _said(deleted, say)
        left = _leftovers(kept.tag, sshds, runner)
        if errors or left:  # state and claim stay, for the next `down`
            raise _not_all_gone(kept.tag, errors, left)
    elif owner is None:
        say(
            f"no claim names {directory} for tag {kept.tag} (after a reboot there is none):"
            " its namespaces and links, if any, are left alone"
        )
    else:
        say(f"tag {kept.tag} now belongs to {owner}: its namespaces and links are left alone")
    shutil.rmtree(directory, ignore_errors=True)  # <home>/testhosts: never a path read
    if directory.exists():
        raise _not_all_gone(kept.tag, [], [str(directory)])
    say(f"removed {directory} (state, hosts.json, ssh_config, keys, sshd logs)")
    if ours:
        claim_file(kept.tag).unlink(missing_ok=True)
        say(f"removed {claim_file(kept.tag)}")
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
    for index, h in enumerate(kept.hosts):
        address = str(h["address"])
        sshd = running.get(index)
        alive = sshd is not None and sshd.alive()
        listening = alive and bool(address) and answers(address)
        pid = sshd.pid if sshd else None
        states.append(HostState(index, address, str(h["netns"]), pid, alive, listening))
    return states

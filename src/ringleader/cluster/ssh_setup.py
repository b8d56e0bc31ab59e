"""``ringleader ssh-setup``: passwordless SSH to every host, done once and checked.

What the guides (seeds 000 and 003) have people do by hand, per host:
a key without passphrase, the public key in ``~/.ssh/authorized_keys`` with
the right permissions, the host key in ``known_hosts``, then a batch-mode
login that must work.

Nomenclature:
- *passphrase-protected key*: one ``ssh-keygen -y -P ''`` cannot read; ranks
  log in with ``BatchMode=yes`` and cannot type it, so it is refused before
  any host is touched unless the running ssh-agent holds it;
- *target*: ``host`` or ``user@host`` as given; ssh resolves it (an alias
  of ``~/.ssh/config`` works);
- *known_hosts*: the file ssh itself checks for this target (``ssh -G``),
  unless ``known_hosts`` is given.

Invariants:
- host keys are verified: an unknown host's fingerprints are shown and must
  be accepted (a question on a terminal, or ``accept_new``); nothing here
  disables checking, and a key that *changed* is never replaced;
- a password is asked by ssh itself, at most once per host (one connection
  installs the key), never read or stored by ringleader;
- the key line is appended only when missing (idempotent); ``~/.ssh`` is
  made 0700 and ``authorized_keys`` 0600; the private key file is 0600;
- every remote command is one string built with ``shlex.quote``.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ringleader.errors import InvalidSpec
from ringleader.launch.ssh import classify_failure

KEY_TYPES = ("ed25519", "rsa")
TIMEOUT_S = 60


@dataclass
class HostResult:
    target: str
    ok: bool = False
    steps: list[str] = field(default_factory=list)  # what was done, in order
    problem: str = ""  # why it failed
    fix: str = ""  # what to do by hand


@dataclass(frozen=True)
class Setup:
    key: Path  # the private key; the public one is key + ".pub"
    ssh_config: str | None = None  # ssh -F
    known_hosts: Path | None = None  # default: the file ssh uses for the target
    accept_new: bool = False
    port: int | None = None
    connect_timeout_s: int = 10


def default_key(key_type: str) -> Path:
    return Path.home() / ".ssh" / f"id_{key_type}"


def ensure_key(key: Path, key_type: str) -> bool:
    """Create the key pair (no passphrase, as the guides require) unless it exists.

    Returns True when it was created. An existing private key is kept; its
    mode is narrowed to 0600 if it was wider.
    """
    if key_type not in KEY_TYPES:
        raise InvalidSpec(f"{key_type!r} is not one of {', '.join(KEY_TYPES)}", "--type")
    if key.exists():
        if key.stat().st_mode & 0o077:
            key.chmod(0o600)
        if not key.with_name(key.name + ".pub").exists():
            raise InvalidSpec(
                f"{key} has no {key.name}.pub beside it; write it with "
                f"`ssh-keygen -y -f {shlex.quote(str(key))} > {shlex.quote(str(key) + '.pub')}`",
                "--key",
            )
        return False
    key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    argv = ["ssh-keygen", "-q", "-t", key_type, "-N", "", "-f", str(key)]
    argv += ["-C", f"ringleader@{socket.gethostname()}"]
    if key_type == "rsa":
        argv += ["-b", "4096"]
    subprocess.run(argv, check=True, capture_output=True, timeout=TIMEOUT_S)
    key.chmod(0o600)
    return True


@dataclass(frozen=True)
class KeyCheck:
    """What ``check_key`` found: the key's type and whether an ssh-agent unlocks it."""

    key_type: str  # "ed25519", "rsa", "ecdsa"... (from the public key)
    in_agent: bool = False  # passphrase-protected, held by the running ssh-agent

    def describe(self) -> str:
        lock = "passphrase, held by ssh-agent" if self.in_agent else "no passphrase"
        return f"{self.key_type}, {lock}"


def check_key(key: Path) -> KeyCheck:
    """Refuse a key that batch logins cannot use, before any host is contacted.

    ``ssh-keygen -y -P ''`` reads the private key with an empty passphrase:
    it fails on a passphrase-protected key (accepted only when the running
    ssh-agent holds it), and its output must be the public key beside it.
    """
    public_file = key.with_name(key.name + ".pub")
    public = public_file.read_text().split()[:2]
    done = subprocess.run(
        ["ssh-keygen", "-y", "-P", "", "-f", str(key)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if done.returncode == 0:
        if done.stdout.split()[:2] != public:
            raise InvalidSpec(f"{public_file} is not the public half of {key}", "--key")
        return KeyCheck(_key_type(public))
    if "passphrase" not in done.stderr:
        why = _last_line(done.stderr) or f"ssh-keygen exit {done.returncode}"
        raise InvalidSpec(f"cannot read {key} as a private key ({why})", "--key")
    if public in agent_keys():
        return KeyCheck(_key_type(public), in_agent=True)
    quoted = shlex.quote(str(key))
    raise InvalidSpec(
        f"{key} has a passphrase, which ranks cannot type (they log in with BatchMode)\n"
        f"  fix: remove it with `ssh-keygen -p -f {quoted}` (the old passphrase, then an empty "
        f'one), or hold it in an agent: `eval "$(ssh-agent)" && ssh-add {quoted}` in the shell '
        "that runs ssh-setup and the launches, or --key another key (a missing one is "
        "created without a passphrase)",
        "--key",
    )


def agent_keys() -> list[list[str]]:
    """``[type, base64]`` of every key the running ssh-agent holds ([] without one)."""
    if not os.environ.get("SSH_AUTH_SOCK"):
        return []
    listed = subprocess.run(
        ["ssh-add", "-L"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    if listed.returncode != 0:
        return []
    return [line.split()[:2] for line in listed.stdout.splitlines() if line.strip()]


def _key_type(public: list[str]) -> str:
    name = public[0] if public else "?"
    return name.removeprefix("ssh-").split("-")[0]


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _ssh_base(setup: Setup) -> list[str]:
    argv = ["ssh"]
    if setup.ssh_config:
        argv += ["-F", setup.ssh_config]
    if setup.port:
        argv += ["-p", str(setup.port)]
    if setup.known_hosts:
        argv += ["-o", f"UserKnownHostsFile={setup.known_hosts}"]
    return [*argv, "-o", f"ConnectTimeout={setup.connect_timeout_s}"]


def _check_target(target: str) -> str:
    if not target or target.startswith("-") or any(c.isspace() for c in target):
        raise InvalidSpec(f"{target!r} is not a host name, address or user@host", "HOST")
    return target


def resolved(target: str, setup: Setup) -> tuple[str, int, Path]:
    """(host name or address, port, known_hosts file) as ssh will use them (``ssh -G``)."""
    out = subprocess.run(
        [*_ssh_base(setup), "-G", target], capture_output=True, text=True, timeout=TIMEOUT_S
    ).stdout
    conf: dict[str, str] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        conf.setdefault(key.lower(), value)
    host = conf.get("hostname", target.rpartition("@")[2])
    port = int(conf.get("port", "22"))
    known = setup.known_hosts or Path(
        os.path.expanduser(conf.get("userknownhostsfile", "~/.ssh/known_hosts").split()[0])
    )
    return host, port, known


def _known_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def is_known(host: str, port: int, known_hosts: Path) -> bool:
    if not known_hosts.exists():
        return False
    found = subprocess.run(
        ["ssh-keygen", "-F", _known_name(host, port), "-f", str(known_hosts)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    return found.returncode == 0 and bool(found.stdout.strip())


def scan(host: str, port: int, timeout_s: int) -> tuple[list[str], list[str]]:
    """The host's public keys (known_hosts lines) and their SHA256 fingerprints."""
    keys = subprocess.run(
        ["ssh-keyscan", "-T", str(timeout_s), "-p", str(port), host],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    ).stdout
    lines = [ln for ln in keys.splitlines() if ln.strip() and not ln.startswith("#")]
    if not lines:
        return [], []
    prints = subprocess.run(
        ["ssh-keygen", "-l", "-f", "-"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    ).stdout
    return lines, [p for p in prints.splitlines() if p.strip()]


def batch_login(target: str, setup: Setup) -> subprocess.CompletedProcess[str]:
    """``ssh -o BatchMode=yes TARGET true`` with our key: the thing that must work."""
    argv = [*_ssh_base(setup), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]
    argv += ["-i", str(setup.key), "-T", target, "true"]
    return subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S
    )


def install_command(public_key: str) -> str:
    """The remote shell command that adds ``public_key`` once, with safe modes."""
    key = shlex.quote(public_key.strip())
    return (
        "umask 077 && mkdir -p ~/.ssh && chmod 700 ~/.ssh && touch ~/.ssh/authorized_keys && "
        f"chmod 600 ~/.ssh/authorized_keys && (grep -qxF {key} ~/.ssh/authorized_keys || "
        f"printf '%s\\n' {key} >> ~/.ssh/authorized_keys)"
    )


def setup_host(target: str, setup: Setup, confirm: Callable[[str, list[str]], bool]) -> HostResult:
    """Host key, key install (one password prompt at most), batch-login check."""
    result = HostResult(_check_target(target))
    host, port, known_hosts = resolved(target, setup)
    if not is_known(host, port, known_hosts):
        lines, prints = scan(host, port, setup.connect_timeout_s)
        if not lines:
            result.problem = f"no SSH host key from {host}:{port} (is sshd running, reachable?)"
            result.fix = f"check `ssh {target}` by hand; is {host} up and port {port} open?"
            return result
        if not (setup.accept_new or confirm(target, prints)):
            result.problem = "host key not accepted"
            result.fix = (
                "verify the fingerprint with the host's owner (`ssh-keygen -lf "
                "/etc/ssh/ssh_host_ed25519_key.pub` on it), then run again with --accept-new"
            )
            return result
        known_hosts.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(known_hosts, "a") as handle:
            handle.write("".join(f"{line}\n" for line in lines))
        result.steps.append("host key recorded: " + "; ".join(p.split()[1] for p in prints))
    if batch_login(target, setup).returncode == 0:
        result.steps.append("key login already works")
        result.ok = True
        return result
    public_key = setup.key.with_name(setup.key.name + ".pub").read_text()
    install = [*_ssh_base(setup), "-o", "StrictHostKeyChecking=yes"]
    install += ["-o", "BatchMode=no", "-o", "NumberOfPasswordPrompts=1"]
    install += ["-T", target, install_command(public_key)]
    done = subprocess.run(install, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        stage, problem, fix = classify_failure(target, done.stderr)
        result.problem = f"installing the key failed ({stage}): {problem}"
        result.fix = manual_steps(target, setup, done.stderr) if stage == "auth" else fix
        return result
    result.steps.append("public key installed in ~/.ssh/authorized_keys")
    check = batch_login(target, setup)
    if check.returncode != 0:
        stage, problem, fix = classify_failure(target, check.stderr)
        result.problem = f"key installed but batch login still fails ({stage}): {problem}"
        result.fix = (
            "on the host: `chmod go-w ~ && chmod 700 ~/.ssh && chmod 600 "
            "~/.ssh/authorized_keys` (sshd's StrictModes), and check that sshd allows "
            "PubkeyAuthentication; " + fix
        )
        return result
    result.steps.append("batch login works")
    result.ok = True
    return result


def manual_steps(target: str, setup: Setup, stderr: str = "") -> str:
    """How to install the key by hand.  A host that takes keys only (its refusal
    lists ``publickey`` alone) asks no password, so ``ssh-copy-id`` cannot work there:
    the key goes in through a way in that already works."""
    check = f"`ssh -o BatchMode=yes -i {setup.key} {target} true` must print nothing and exit 0"
    if _keys_only(stderr):
        return (
            f"{target} takes keys only (no password login), so ssh-copy-id cannot work: add "
            f"{setup.key}.pub to ~/.ssh/authorized_keys there with a way in that works (a "
            f"key it takes: `ssh-copy-id -f -i {setup.key}.pub -o IdentityFile=KEY "
            f"{target}`; or your cloud console's SSH keys, or the machine's console), then " + check
        )
    return f"by hand: `ssh-copy-id -i {setup.key}.pub {target}` (asks the password), then {check}"


def _keys_only(stderr: str) -> bool:
    """ssh's refusal lists the methods the host allows: ``(publickey)`` alone."""
    found = re.search(r"Permission denied \(([^)]*)\)", stderr)
    return bool(found) and found.group(1).split(",") == ["publickey"]

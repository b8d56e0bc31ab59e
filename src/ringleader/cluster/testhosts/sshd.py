"""What each test host's sshd runs with, and the ssh config that reaches them all.

Why its own module: these are the choices that make a test host a fair stand-in for
a real machine, worth reading apart from the plumbing: key-only root logins, host
keys that are checked (``StrictHostKeyChecking yes`` against a known_hosts of the
generated keys, never the machine's), room for a launcher's many connections, and a
hostname of the host's own (a UTS namespace), so Gloo and Horovod, which bind to
what the machine's name resolves to, see a distinct machine.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ringleader.cluster.testhosts.links import SBIN_PATH, TestHostError
from ringleader.cluster.testhosts.mounts import hide_script, own_containers_script


def check_quotable(path: Path) -> None:
    """``ValueError`` when ``path`` cannot be written in an ssh(d) config: a value is
    quoted with double quotes there, and nothing escapes a quote or a line break."""
    bad = [c for c in ('"', "\n", "\r", "\0") if c in str(path)]
    if bad:
        raise ValueError(
            f"{str(path)!r} holds {', '.join(map(repr, bad))}, which an ssh config cannot quote"
        )


def quoted(path: Path, *, tokens: bool = False) -> str:
    """``path`` as one config value: in double quotes (it may hold spaces), ``%``
    doubled where ssh(d) expands ``%`` tokens in that option."""
    check_quotable(path)
    text = str(path).replace("%", "%%") if tokens else str(path)
    return f'"{text}"'


def sshd_config(
    host_dir: Path, authorized_keys: Path, password_auth: bool, extra: Mapping[str, str]
) -> str:
    """The text of one host's sshd_config (``extra`` overrides the defaults)."""
    options = {
        "Port": "22",
        "AddressFamily": "inet",
        "HostKey": quoted(host_dir / "ssh_host_ed25519_key"),
        "PidFile": quoted(host_dir / "sshd.pid"),
        "AuthorizedKeysFile": quoted(authorized_keys, tokens=True),
        "PermitRootLogin": "prohibit-password",
        "PubkeyAuthentication": "yes",
        "PasswordAuthentication": "yes" if password_auth else "no",
        "KbdInteractiveAuthentication": "no",
        # sshd's StrictModes refuses authorized_keys below any group/other-writable
        # directory, sticky or not: every test network's (in /tmp) would be refused.
        # Root checks these paths itself instead (``paths``: made exclusively, below
        # directories only root can change but for a sticky bit).
        "StrictModes": "no",
        "UsePAM": "no",
        "UseDNS": "no",
        "PrintMotd": "no",
        "MaxStartups": "200",  # a launcher opens one connection per rank at once
        "MaxSessions": "100",
        "LogLevel": "VERBOSE",
        "Subsystem": "sftp internal-sftp",
        **extra,
    }
    return "".join(f"{k} {v}\n" for k, v in options.items())


def ssh_config(identity_file: Path, known_hosts: Path) -> str:
    """The client side: our key, our known_hosts only, batch mode, checked host keys."""
    options = {
        "IdentityFile": quoted(identity_file, tokens=True),
        "IdentitiesOnly": "yes",
        "UserKnownHostsFile": quoted(known_hosts, tokens=True),
        "GlobalKnownHostsFile": "/dev/null",  # only our keys, never the machine's
        "StrictHostKeyChecking": "yes",
        "UpdateHostKeys": "no",  # known_hosts is ours and read-only in spirit
        "BatchMode": "yes",
        "User": "root",
        "ConnectTimeout": "5",
        "ControlMaster": "no",
        "LogLevel": "ERROR",
    }
    body = "".join(f"  {k} {v}\n" for k, v in options.items())
    return f"Host *\n{body}"


#: A test host's resolver config: no nameserver, so the resolver asks 127.0.0.1, where
#: nothing listens inside the host's namespace, and a name not in its /etc/hosts fails
#: at once. With the machine's own (a nameserver the test network does not route to),
#: each such lookup waited out the resolver's timeouts, 10 s: a gloo rank's TCPStore
#: names every peer that connects (getnameinfo), and 4 ranks on 2 hosts took ~22 s
#: to their first step under any launcher.
RESOLV_CONF = (
    "# ringleader test host: the test network has no DNS; its names are in /etc/hosts.\n"
    "# No nameserver: a lookup of any other name fails at once (127.0.0.1 refuses).\n"
)


#: What root's ~/.bashrc is on a test host. Debian's bash runs ~/.bashrc for every ssh
#: command, and every test host shares the machine's files: a machine's ~/.bashrc that
#: takes a lock in them (pyenv's ``init`` rehashes its shims under a lock file) leaves
#: that lock behind whenever a host's session is killed mid-step, as fault tests do,
#: and every later session then waits out pyenv's 60 s before its command runs. A test
#: host's root finds the tools the command that built the network found instead.
ROOT_BASHRC = (
    "# ringleader test host: root's shell setup on this host. The machine's own\n"
    "# ~/.bashrc is not run here (ringleader.cluster.testhosts.sshd.ROOT_BASHRC says why).\n"
)


def root_bashrc(path: str) -> str:
    """A test host's root ~/.bashrc: ``ROOT_BASHRC``, then ``path`` as its PATH."""
    return ROOT_BASHRC + f"export PATH={shlex.quote(path)}\n" if path else ROOT_BASHRC


def hosts_file(names: Mapping[str, str]) -> str:
    """A test host's /etc/hosts: localhost, then each address of the test network with
    its names (``names``: address -> names), as a cluster's /etc/hosts lists its nodes,
    so a peer's address is named without asking a DNS server (see RESOLV_CONF).

    Each address is named in its IPv4-mapped IPv6 form too (``::ffff:a.b.c.d``, by its
    first name only): a dual-stack listener (gloo's TCPStore) sees its IPv4 peers so,
    and the resolver's files do not map one form onto the other."""
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    lines += [f"{address} {name}" for address, name in names.items()]
    lines += [f"::ffff:{address} {name.split()[0]}" for address, name in names.items()]
    return "\n".join(lines) + "\n"


def bind_names_script(etc: Mapping[str, Path]) -> list[str]:
    """Shell lines that bind each file of ``etc`` (the machine's path -> ours) over that
    path in the current (private) mount namespace: only this host's sessions see them."""
    q = shlex.quote
    return [
        f"mount --bind {q(str(ours))} {q(target)} || echo 'test host: cannot bind'"
        f" {q(str(ours))} over {q(target)} >&2"
        for target, ours in etc.items()
    ]


def sshd_binary() -> str:
    """sshd by absolute path: sshd re-execs itself and refuses a relative one."""
    return shutil.which("sshd", path=SBIN_PATH) or "/usr/sbin/sshd"


def sshd_argv(
    netns: str,
    address: str,
    host_dir: Path,
    *,
    hidden_dirs: Sequence[str] = (),
    own_containers: bool = False,
    protected: Sequence[Path] = (),
    etc: Mapping[str, Path] | None = None,
) -> list[str]:
    """The command that runs the host's sshd in its namespaces, keeping one pid.

    ``ip netns exec``, ``unshare`` and ``sh``'s ``exec`` each replace themselves, so
    the pid Popen reports is sshd's: the pid that is recorded and later signalled.
    ``etc``: files bound over the machine's for this host's sessions (its /etc/hosts,
    /etc/resolv.conf, root's ~/.bashrc); ``ip netns exec`` gives each sshd a mount
    namespace of its own.
    """
    sshd = [sshd_binary(), "-D", "-e", "-f", str(host_dir / "sshd_config")]
    # Its own hostname, its address (as a machine's name resolves to its own address:
    # Gloo's devices that name no interface, Horovod's process sets, bind to it).
    named = f"hostname {address}"
    binds = bind_names_script(etc or {})
    uts = ["unshare", "--uts"]
    if not (hidden_dirs or own_containers):
        return ["ip", "netns", "exec", netns, *uts, "/bin/sh", "-c",
                " && ".join([named, *(f"{{ {b}; }}" for b in binds),
                             f"exec {shlex.join(sshd)}"])]  # fmt: skip
    keep = [*protected, Path(sshd[0]), Path("/run/sshd")]
    script = ["set -e", named, *binds, *hide_script(hidden_dirs, keep, host_dir / "tools")]
    if own_containers:
        script += own_containers_script(host_dir)
    script.append(f"exec {shlex.join(sshd)}")
    # A file, not ``-c``: hiding an entry of a big directory (/usr/bin) binds back
    # every other one, more than one argument may hold.
    (host_dir / "mounts.sh").write_text("\n".join(script) + "\n")
    unshare = [*uts, "--mount", "--propagation", "private"]
    return ["ip", "netns", "exec", netns, *unshare, "/bin/sh", str(host_dir / "mounts.sh")]


def wait_ready(
    process: subprocess.Popen[bytes], address: str, log: Path, name: str, timeout: float
) -> None:
    """Poll until the sshd sends its banner; fail early (with its log) if it died."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise TestHostError(f"sshd of {name} exited: {log.read_text()}")
        with (
            contextlib.suppress(OSError),
            socket.create_connection((address, 22), timeout=1) as s,
        ):
            if s.recv(4).startswith(b"SSH-"):
                return
        if time.monotonic() > deadline:
            raise TestHostError(f"sshd of {name} not ready: {log.read_text()}")
        time.sleep(0.02)


def answers(address: str, timeout: float = 1.0) -> bool:
    """Whether an sshd answers at ``address:22`` now (its banner arrives)."""
    with contextlib.suppress(OSError), socket.create_connection((address, 22), timeout) as s:
        return s.recv(4).startswith(b"SSH-")
    return False

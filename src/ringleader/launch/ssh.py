"""OpenSSH, used the safe way: batch mode, host keys checked, errors explained.

Why OpenSSH and not a Python SSH library: users already have keys, agents,
``~/.ssh/config`` and ``known_hosts`` working with it, and it is what
``mpirun`` uses too.

Invariants:
- ``BatchMode=yes``: no password or host-key prompt can ever hang a launch;
- host keys are checked against known_hosts (ssh's default); nothing here
  turns checking off;
- the remote command is one string built only with ``shlex.quote``;
- a failure is classified (DNS, connect, auth, host key) with a fix.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

SETUP_FIX = (
    "set up key login once: `ringleader ssh-setup {host}` (or: ssh-keygen -t ed25519; "
    "ssh-copy-id {host}; then `ssh -o BatchMode=yes {host} true` must work)"
)

# (substring of ssh's stderr, stage, fix)
_FAILURES: list[tuple[str, str, str]] = [
    ("could not resolve hostname", "DNS", "check the host name, /etc/hosts or ~/.ssh/config"),
    ("name or service not known", "DNS", "check the host name, /etc/hosts or ~/.ssh/config"),
    (
        "host key verification failed",
        "host key",
        "the host's key is not in known_hosts or changed: verify its fingerprint, then "
        "`ssh-keyscan {host} >> ~/.ssh/known_hosts` (or `ssh-keygen -R {host}` if it changed)",
    ),
    (
        "remote host identification has changed",
        "host key",
        "the host key changed: if expected, `ssh-keygen -R {host}` and accept the new key",
    ),
    ("permission denied", "auth", SETUP_FIX),
    ("too many authentication failures", "auth", SETUP_FIX),
    ("connection refused", "connect", "is sshd running on {host} and listening on its port?"),
    ("connection timed out", "connect", "is {host} up and reachable (firewall, VPN, address)?"),
    ("operation timed out", "connect", "is {host} up and reachable (firewall, VPN, address)?"),
    ("no route to host", "connect", "is {host} up and reachable (firewall, VPN, address)?"),
    ("network is unreachable", "connect", "check this machine's network toward {host}"),
    ("connection closed", "connect", "sshd on {host} closed the connection; check its logs"),
]


@dataclass(frozen=True)
class SSHOptions:
    """How to reach hosts: an optional config file and extra ``-o`` options."""

    config_file: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    connect_timeout_s: int = 10

    @classmethod
    def from_env(cls, config_file: str | None = None) -> SSHOptions:
        return cls(config_file=config_file or os.environ.get("RINGLEADER_SSH_CONFIG") or None)


def ssh_argv(target: str, remote_command: str, opts: SSHOptions) -> list[str]:
    """The ``ssh`` argv that runs ``remote_command`` (already quoted) on ``target``."""
    argv = ["ssh"]
    if opts.config_file:
        argv += ["-F", opts.config_file]
    base = {
        "BatchMode": "yes",
        "ConnectTimeout": str(opts.connect_timeout_s),
        "ServerAliveInterval": "3",
        "ServerAliveCountMax": "2",
    }
    for key, value in {**base, **opts.options}.items():
        argv += ["-o", f"{key}={value}"]
    if target.startswith("-"):
        raise ValueError(f"refusing host name that looks like an option: {target!r}")
    return [*argv, "-T", target, remote_command]


def is_here(target: str) -> bool:
    """``target`` (``[user@]host``) names this machine: a ``localhost`` entry of a hosts
    file runs here, as ``launch`` runs it, without an sshd on this machine."""
    from ringleader.hosts import is_local_address, ssh_host

    return is_local_address(ssh_host(target))


def host_argv(target: str, command: str, opts: SSHOptions) -> list[str]:
    """What runs the shell ``command`` on ``target``: ``sh -c`` here for this machine
    (``is_here``), else ``ssh`` (``ssh_argv``)."""
    if is_here(target):
        return ["/bin/sh", "-c", command]
    return ssh_argv(target, command, opts)


def agent_command(python: str, cwd: str, job_id: str) -> str:
    """Shell command that checks the host can run ranks, then becomes the agent.

    The checks print a marker the supervisor recognises, so a missing working
    directory or interpreter is reported per host before any rank starts.
    """
    q_py, q_cwd = shlex.quote(python), shlex.quote(cwd)
    return (
        f"cd {q_cwd} 2>/dev/null || {{ echo RINGLEADER-MISSING workdir {q_cwd} >&2; exit 97; }}; "
        f"test -x {q_py} || {{ echo RINGLEADER-MISSING interpreter {q_py} >&2; exit 98; }}; "
        f"exec {q_py} -m ringleader.launch.agent --job-id {shlex.quote(job_id)}"
    )


def classify_failure(host: str, stderr: str) -> tuple[str, str, str]:
    """(stage, detail, fix) for an agent that ended before it was ready."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    for line in lines:
        if line.startswith("RINGLEADER-MISSING "):
            _, kind, path = line.split(" ", 2)
            if kind == "workdir":
                return (
                    "working directory",
                    f"{path} does not exist",
                    "copy the code to the same path on every host (`rsync -a DIR HOST:DIR`)",
                )
            return (
                "interpreter",
                f"{path} does not exist",
                "install the same Python at the same path on every host",
            )
    if any("No module named ringleader" in ln for ln in lines):
        return (
            "ringleader",
            "ringleader is not installed for this interpreter",
            "pip install ringleader into the same interpreter on every host",
        )
    low = stderr.lower()
    for needle, stage, fix in _FAILURES:
        if needle in low:
            detail = next((ln for ln in lines if needle in ln.lower()), needle)
            return stage, detail, fix.format(host=host)
    detail = lines[-1] if lines else "the agent ended before it was ready"
    return "agent start", detail, ""

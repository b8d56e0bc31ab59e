"""``ringleader ssh-setup`` against real sshd hosts (network namespaces), from nothing:
a password-only user, no key, no known host keys -> batch login that works."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures.testhosts import (  # noqa: F401  (provides the `make_test_hosts` fixture)
    TestHostNetwork,
    make_test_hosts_fixture,
)

USERS = ("rltsetup0", "rltsetup1", "rltsetup2")  # the hosts share /home: a user per host
PASSWORD = "s3cret-Pw"
MakeHosts = Callable[..., TestHostNetwork]


@pytest.fixture
def password_users() -> Iterator[tuple[str, ...]]:
    """Users that can only log in with a password (``/etc/passwd`` is shared by the hosts,
    and so is ``/home``: each host is reached as its own user, so each has its own
    ``~/.ssh``, as separate machines would)."""
    for user in USERS:
        subprocess.run(["userdel", "-r", user], capture_output=True, check=False)
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", user], check=True, capture_output=True)
        subprocess.run(["chpasswd"], input=f"{user}:{PASSWORD}\n", text=True, check=True)
    try:
        yield USERS
    finally:
        for user in USERS:
            subprocess.run(["userdel", "-r", user], capture_output=True, check=False)


class Client:
    """ssh-setup as a user runs it, with an askpass that counts the password prompts."""

    def __init__(self, tmp: Path, net: TestHostNetwork, password: str = PASSWORD) -> None:
        self.tmp, self.net = tmp, net
        self.key = tmp / "keys" / "id_ed25519"
        self.known_hosts = tmp / "known_hosts"
        self.asked = tmp / "asked"
        self.askpass = tmp / "askpass.sh"
        self.askpass.write_text(f"#!/bin/sh\necho asked >> {self.asked}\necho '{password}'\n")
        self.askpass.chmod(0o700)
        # The network's ssh_config minus its own identity and known_hosts: ours start empty.
        self.config = tmp / "ssh_config"
        self.config.write_text(
            "Host *\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n"
            "  ConnectTimeout 5\n  ControlMaster no\n  LogLevel ERROR\n"
            "  PreferredAuthentications publickey,password,keyboard-interactive\n"
        )

    def prompts(self) -> int:
        return len(self.asked.read_text().splitlines()) if self.asked.exists() else 0

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "SSH_ASKPASS": str(self.askpass), "SSH_ASKPASS_REQUIRE": "force"}
        env.pop("SSH_AUTH_SOCK", None)
        argv = [sys.executable, "-m", "ringleader", "ssh-setup", "--key", str(self.key)]
        argv += ["--ssh-config", str(self.config), "--known-hosts", str(self.known_hosts), *args]
        return subprocess.run(
            argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180
        )

    def batch_login(self, target: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ssh", "-F", str(self.config), "-o", f"UserKnownHostsFile={self.known_hosts}",
             "-o", "BatchMode=yes", "-i", str(self.key), target, "true"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
        )  # fmt: skip


def network(make: MakeHosts, n: int) -> TestHostNetwork:
    # Users' own ~/.ssh/authorized_keys (the default) as well as the fixture's root key.
    return make(n, password_auth=True, sshd_options={"AuthorizedKeysFile": ".ssh/authorized_keys"})


def test_from_nothing_to_batch_login_on_three_hosts_asking_each_password_once(
    make_test_hosts: MakeHosts, password_users: tuple[str, ...], tmp_path: Path
) -> None:
    net = network(make_test_hosts, 3)
    client = Client(tmp_path, net)
    targets = [f"{user}@{h.address}" for user, h in zip(password_users, net.hosts, strict=True)]
    for target in targets:
        assert client.batch_login(target).returncode != 0  # nothing works yet

    refused = client.run(*targets)  # host keys unknown and no terminal to ask on
    assert refused.returncode == 1
    assert "SHA256:" in refused.stdout and "--accept-new" in refused.stderr
    assert client.prompts() == 0 and not client.known_hosts.exists()

    done = client.run("--accept-new", *targets)
    assert done.returncode == 0, done.stdout + done.stderr
    assert client.prompts() == 3  # one password per host, asked by ssh itself
    assert "created key" in refused.stdout and oct(client.key.stat().st_mode)[-3:] == "600"
    for target in targets:
        assert client.batch_login(target).returncode == 0
    for user in password_users:
        home = Path(f"/home/{user}/.ssh")
        assert oct(home.stat().st_mode)[-3:] == "700"
        assert oct((home / "authorized_keys").stat().st_mode)[-3:] == "600"

    again = client.run(*targets)  # idempotent: nothing asked, no duplicate line
    assert again.returncode == 0, again.stderr
    assert client.prompts() == 3 and again.stdout.count("key login already works") == 3
    public = client.key.with_name("id_ed25519.pub").read_text().strip()
    for user in password_users:
        lines = Path(f"/home/{user}/.ssh/authorized_keys").read_text().splitlines()
        assert lines.count(public) == 1


def test_a_host_that_refuses_is_reported_with_the_reason_and_manual_steps(
    make_test_hosts: MakeHosts, password_users: tuple[str, ...], tmp_path: Path
) -> None:
    net = network(make_test_hosts, 1)
    client = Client(tmp_path, net, password="wrong")
    user = password_users[0]
    target = f"{user}@{net.hosts[0].address}"
    done = client.run("--accept-new", target, f"{user}@{net.unreachable_address}")
    assert done.returncode == 1
    assert f"{target}: installing the key failed (auth)" in done.stderr, done.stderr
    assert "ssh-copy-id" in done.stderr
    assert f"{net.unreachable_address}: no SSH host key" in done.stderr
    assert client.prompts() == 1  # the one wrong password, never retried in a loop

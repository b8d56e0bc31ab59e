"""``ringleader ssh-setup`` against real sshd hosts (network namespaces), from nothing:
a password-only user, no key, no known host keys -> batch login that works."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_until
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

    def run(self, *args: str, agent: str | None = None) -> subprocess.CompletedProcess[str]:
        """ssh-setup with this client's key; ``agent``: the ssh-agent socket it may use."""
        env = {**os.environ, "SSH_ASKPASS": str(self.askpass), "SSH_ASKPASS_REQUIRE": "force"}
        env.pop("SSH_AUTH_SOCK", None)
        if agent:
            env["SSH_AUTH_SOCK"] = agent
        argv = [sys.executable, "-m", "ringleader", "ssh-setup", "--key", str(self.key)]
        argv += ["--ssh-config", str(self.config), "--known-hosts", str(self.known_hosts), *args]
        return subprocess.run(
            argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180
        )

    def batch_login(
        self, target: str, agent: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
        return subprocess.run(
            ["ssh", "-F", str(self.config), "-o", f"UserKnownHostsFile={self.known_hosts}",
             "-o", "BatchMode=yes", "-i", str(self.key), target, "true"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
            env={**env, "SSH_AUTH_SOCK": agent} if agent else env,
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


PASSPHRASE = "correct horse battery"


def passphrase_key(client: Client) -> None:
    """A real passphrase-protected key where the client's key goes."""
    client.key.parent.mkdir(parents=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", PASSPHRASE, "-f", str(client.key)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip


@pytest.fixture
def ssh_agent(tmp_path: Path) -> Iterator[str]:
    """A running ssh-agent of our own: its socket path; killed by its pid at the end."""
    socket = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket)], stdout=subprocess.DEVNULL)
    try:
        wait_until(socket.is_socket, 30, "ssh-agent's socket")
        yield str(socket)
    finally:
        agent.terminate()
        agent.wait(timeout=10)


def test_a_key_with_a_passphrase_is_refused_before_any_host_is_touched(
    make_test_hosts: MakeHosts, password_users: tuple[str, ...], tmp_path: Path
) -> None:
    net = network(make_test_hosts, 1)
    client = Client(tmp_path, net)
    passphrase_key(client)
    user = password_users[0]
    target = f"{user}@{net.hosts[0].address}"

    refused = client.run("--accept-new", target)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    message = " ".join(refused.stderr.split())  # as one line, whatever the wrapping
    assert f"--key: {client.key} has a passphrase" in message, refused.stderr
    assert f"ssh-keygen -p -f {client.key}" in message and f"ssh-add {client.key}" in message
    assert "--key another key" in message and "Traceback" not in refused.stderr
    assert "no passphrase" not in refused.stdout and "authorized_keys" not in refused.stderr
    # Nothing was done anywhere: no password asked, no host key, no key installed.
    assert client.prompts() == 0 and not client.known_hosts.exists()
    assert not Path(f"/home/{user}/.ssh/authorized_keys").exists()

    # The fix the message names works: the passphrase removed, the same key is installed.
    subprocess.run(
        ["ssh-keygen", "-p", "-P", PASSPHRASE, "-N", "", "-f", str(client.key)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    done = client.run("--accept-new", target)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "using key" in done.stdout and "(ed25519, no passphrase)" in done.stdout
    assert client.batch_login(target).returncode == 0


def test_a_key_with_a_passphrase_held_by_an_agent_is_used_through_it(
    make_test_hosts: MakeHosts, password_users: tuple[str, ...], tmp_path: Path, ssh_agent: str
) -> None:
    net = network(make_test_hosts, 1)
    client = Client(tmp_path, net)
    passphrase_key(client)
    unlock = tmp_path / "unlock.sh"
    unlock.write_text(f"#!/bin/sh\necho '{PASSPHRASE}'\n")
    unlock.chmod(0o700)
    added = subprocess.run(
        ["ssh-add", str(client.key)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=30, env={**os.environ, "SSH_AUTH_SOCK": ssh_agent, "SSH_ASKPASS": str(unlock),
                         "SSH_ASKPASS_REQUIRE": "force"},
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    target = f"{password_users[0]}@{net.hosts[0].address}"

    done = client.run("--accept-new", target, agent=ssh_agent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(ed25519, passphrase, held by ssh-agent)" in done.stdout
    assert client.prompts() == 1  # the host's password, once
    assert client.batch_login(target, agent=ssh_agent).returncode == 0
    assert client.batch_login(target).returncode != 0  # the key alone cannot be read


def test_a_key_that_is_not_a_key_or_whose_public_half_differs_is_named(tmp_path: Path) -> None:
    key = tmp_path / "id_ed25519"
    key.write_text("not a key\n")
    key.chmod(0o600)
    key.with_name("id_ed25519.pub").write_text("ssh-ed25519 AAAA x\n")
    argv = [sys.executable, "-m", "ringleader", "ssh-setup", "--key", str(key), "h1"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"--key: cannot read {key} as a private key" in done.stderr

    key.unlink()
    key.with_name("id_ed25519.pub").unlink()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                   check=True, capture_output=True, timeout=30)  # fmt: skip
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                   check=True, capture_output=True, timeout=30)  # fmt: skip
    key.with_name("id_ed25519.pub").write_text(other.with_name("other.pub").read_text())
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{key}.pub is not the public half of {key}" in " ".join(done.stderr.split())


def test_a_keys_only_host_is_told_what_can_install_the_key(
    make_test_hosts: MakeHosts, password_users: tuple[str, ...], tmp_path: Path
) -> None:
    """A host that takes keys only asks no password: ssh-copy-id cannot work there, and
    the fix says what can (a key it takes, the cloud's or the machine's console)."""
    net = make_test_hosts(1, password_auth=False, sshd_options={
        "AuthorizedKeysFile": ".ssh/authorized_keys", "KbdInteractiveAuthentication": "no"})  # fmt: skip
    client = Client(tmp_path, net)
    target = f"{password_users[0]}@{net.hosts[0].address}"
    done = client.run("--accept-new", target)
    assert done.returncode == 1
    said = " ".join(done.stderr.split())
    assert f"{target}: installing the key failed (auth)" in said, said
    assert "takes keys only (no password login), so ssh-copy-id cannot work" in said, said
    assert "IdentityFile=KEY" in said and "(asks the password)" not in said
    assert client.prompts() == 0  # no password was asked: none would do

"""Seed 000 ("Passwordless SSH setup" for distributed training), step by step as printed,
by a fresh OS account on a real terminal, against two network-namespace hosts whose
sshd reads the users' own ``~/.ssh/authorized_keys`` with ``StrictModes yes``.

What the guide's steps give, typed as printed (the editor steps — "open the public key
in vi ... paste it into authorized_keys" — done with ``sed`` and ``cat``):

- for a fresh user ``cd ~/.ssh`` fails (no such directory) and the remedy the guide
  gives, ``chmod u+x ~/.ssh``, fails the same way; ``ssh-keygen -t rsa`` with Enter at
  its three prompts creates the directory (0700) and the pair, and then the steps work;
- ``ssh HOST`` asks once per host to accept its key and logs in without a password;
  what ranks do, ``ssh -o BatchMode=yes HOST true``, works; ``ringleader ssh-setup``
  on that result changes nothing and says key login already works;
- the test hosts share ``/home`` as NFS homes do, so the guide's "IMPORTANT NOTE"
  (``authorized_keys`` on every target) holds by itself here.

Against that, ``ringleader ssh-setup`` for a second user whose key has a passphrase:
refused before any host is touched, naming ``ssh-keygen -p -f KEY``; the guide's own
recipe read literally ("replacing new_passphrase with a blank space":
``ssh-keygen -p -P OLD -N   -f KEY``) is refused by ssh-keygen ("Too many arguments")
and leaves the passphrase; ``-N ''`` removes it and ssh-setup then installs the key,
with the same modes the manual steps give.

ringleader's interpreter lives under ``/root`` here, which other accounts cannot run,
so ``ringleader ssh-setup`` runs as root with the user's key (``--key``): the same ssh,
the same files, installed as the user on the hosts (``USER@HOST``).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.terminal import Terminal
from tests.fixtures.testhosts import TestHostNetwork, require_test_hosts

pytestmark = pytest.mark.multihost

BY_HAND = "rltseed0h"  # follows the guide
BY_TOOL = "rltseed0t"  # has a passphrase, then uses ringleader ssh-setup
PASSWORD = "Seed-000-pw"  # BY_TOOL's login password, which ssh-setup's one connection uses
PASSPHRASE = "tr0ub4dor &3"


@pytest.fixture(scope="module")
def net() -> Iterator[TestHostNetwork]:
    """Two hosts; sshd reads ``~/.ssh/authorized_keys`` and checks its modes."""
    require_test_hosts()
    options = {"AuthorizedKeysFile": ".ssh/authorized_keys", "StrictModes": "yes"}
    with TestHostNetwork(2, password_auth=True, sshd_options=options) as network:
        yield network


@pytest.fixture(scope="module")
def accounts() -> Iterator[None]:
    """The two fresh accounts (``/etc/passwd`` and ``/home`` are shared by the hosts).

    useradd leaves a password field of ``!`` (locked); the test hosts' sshd runs without
    PAM, and then refuses a locked account even a key login, which Debian's sshd (with
    PAM) allows. ``*`` is the same "no password works" without the lock.
    """
    for user in (BY_HAND, BY_TOOL):
        subprocess.run(["userdel", "-r", user], capture_output=True, check=False)
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", "-p", "*", user], check=True,
                       capture_output=True)  # fmt: skip
    subprocess.run(["chpasswd"], input=f"{BY_TOOL}:{PASSWORD}\n", text=True, check=True)
    try:
        yield
    finally:
        for user in (BY_HAND, BY_TOOL):
            subprocess.run(["userdel", "-r", user], capture_output=True, check=False)


def login_shell(user: str) -> Terminal:
    """The user's own login shell on a terminal, as after logging in."""
    return Terminal(["su", "-", user], env={"TERM": "dumb", "PATH": "/usr/bin:/bin"})


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def ssh_setup(tmp_path: Path, user: str, *targets: str) -> subprocess.CompletedProcess[str]:
    """``ringleader ssh-setup`` with the user's key; ssh's password prompts answered."""
    askpass = tmp_path / "askpass.sh"
    askpass.write_text(f"#!/bin/sh\necho {PASSWORD}\n")
    askpass.chmod(0o700)
    config = tmp_path / "ssh_config"  # root's defaults must not leak in
    config.write_text("Host *\n  ConnectTimeout 5\n  LogLevel ERROR\n")
    argv = [sys.executable, "-m", "ringleader", "ssh-setup", "--key", f"/home/{user}/.ssh/id_rsa",
            "--ssh-config", str(config), "--known-hosts", str(tmp_path / "known_hosts"),
            "--accept-new", *targets]  # fmt: skip
    env = {**os.environ, "SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force"}
    env.pop("SSH_AUTH_SOCK", None)
    return subprocess.run(
        argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180
    )


def keygen_rsa(shell: Terminal, user: str, passphrase: str) -> None:
    """``ssh-keygen -t rsa``, answering its prompts as the guide says (or not)."""
    shell.type("ssh-keygen -t rsa\n")
    shell.expect(rf"Enter file in which to save the key \(/home/{user}/\.ssh/id_rsa\): ")
    shell.type("\n")
    shell.expect(r"Enter passphrase[^:]*\(empty for no passphrase\): ")
    shell.type(f"{passphrase}\n")
    shell.expect(r"Enter same passphrase again: ")
    shell.type(f"{passphrase}\n")
    shell.expect(rf"Your public key has been saved in /home/{user}/\.ssh/id_rsa\.pub")


def test_the_guides_steps_by_hand_give_a_fresh_user_passwordless_ssh(
    net: TestHostNetwork, accounts: None, tmp_path: Path
) -> None:
    home = Path(f"/home/{BY_HAND}")
    with login_shell(BY_HAND) as shell:
        # "Get to your .ssh directory `cd ~/.ssh` (if this gives you an error, change the
        # permissions: `chmod u+x ~/.ssh`)": a fresh user has no ~/.ssh at all.
        cd = shell.run("cd ~/.ssh")
        assert cd.rc == 1 and f"cd: {home}/.ssh: No such file or directory" in cd.out, cd
        chmod = shell.run("chmod u+x ~/.ssh")
        assert chmod.rc == 1 and "No such file or directory" in chmod.out, chmod
        # "Run the command: `ssh-keygen -t rsa`", Enter at every prompt.
        keygen_rsa(shell, BY_HAND, passphrase="")
        assert f"Created directory '{home}/.ssh'" in shell.transcript
        assert shell.run("cd ~/.ssh").rc == 0
        # The editor steps: drop "@<hostname>" from the key's end, paste it into
        # authorized_keys, then "chmod 600 file1 file2 file3".
        assert shell.run(r"sed -i 's/@[^ @]*$//' id_rsa.pub").rc == 0
        assert shell.run("cat id_rsa.pub > authorized_keys").rc == 0
        assert shell.run("chmod 600 id_rsa id_rsa.pub authorized_keys").rc == 0
        # "Test the SSH `ssh <ip_or_hostname.domain>`": once per participating host.
        for host in net.hosts:
            shell.type(f"ssh {host.address}\n")
            shell.expect(r"continue connecting \(yes/no/\[fingerprint\]\)\? ")
            shell.type("yes\n")
            on = shell.run("echo on $SSH_CONNECTION")  # typed in the remote shell
            here = rf"^on \S+ \d+ {re.escape(host.address)} 22$"  # $SSH_CONNECTION's server end
            assert on.rc == 0 and re.search(here, on.out, re.M), on
            shell.type("exit\n")
            shell.expect(rf"Connection to {re.escape(host.address)} closed")
        for host in net.hosts:  # what a rank's launcher does: no terminal, no question
            batch = shell.run(f"ssh -o BatchMode=yes {host.address} true")
            assert batch.rc == 0, batch
        assert "assword:" not in shell.transcript  # never asked for a password
        shell.type("exit\n")
        assert shell.wait() == 0

    public = (home / ".ssh/id_rsa.pub").read_text()
    assert public.rstrip().endswith(f" {BY_HAND}")  # "the result will be your idsid only"
    assert (home / ".ssh/authorized_keys").read_text() == public
    assert mode(home / ".ssh") == "0o700"
    for name in ("id_rsa", "id_rsa.pub", "authorized_keys"):
        assert mode(home / ".ssh" / name) == "0o600", name

    # ringleader's check of the result: nothing to do on either host.
    checked = ssh_setup(tmp_path, BY_HAND, *(f"{BY_HAND}@{h.address}" for h in net.hosts))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "(rsa, no passphrase)" in checked.stdout
    assert checked.stdout.count("key login already works") == 2, checked.stdout
    assert (home / ".ssh/authorized_keys").read_text() == public  # nothing added


def test_ssh_setup_refuses_a_passphrase_until_it_is_removed_then_does_the_steps(
    net: TestHostNetwork, accounts: None, tmp_path: Path
) -> None:
    home = Path(f"/home/{BY_TOOL}")
    key = home / ".ssh/id_rsa"
    targets = [f"{BY_TOOL}@{h.address}" for h in net.hosts]
    with login_shell(BY_TOOL) as shell:
        keygen_rsa(shell, BY_TOOL, passphrase=PASSPHRASE)  # against the guide's advice

        refused = ssh_setup(tmp_path, BY_TOOL, *targets)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        message = " ".join(refused.stderr.split())
        assert f"--key: {key} has a passphrase" in message, refused.stderr
        assert f"ssh-keygen -p -f {key}" in message
        assert not (home / ".ssh/authorized_keys").exists()  # no host was touched

        # The guide's recipe, `ssh-keygen -p [-P old_passphrase] [-N new_passphrase]
        # [-f keyfile]` "by replacing new_passphrase with a blank space", read literally.
        literal = shell.run(f"ssh-keygen -p -P '{PASSPHRASE}' -N   -f ~/.ssh/id_rsa")
        assert literal.rc == 1 and "Too many arguments" in literal.out, literal
        assert ssh_setup(tmp_path, BY_TOOL, *targets).returncode == 2  # still protected

        removed = shell.run(f"ssh-keygen -p -P '{PASSPHRASE}' -N '' -f ~/.ssh/id_rsa")
        assert removed.rc == 0 and "saved with the new passphrase" in removed.out, removed
        shell.type("exit\n")
        assert shell.wait() == 0

    done = ssh_setup(tmp_path, BY_TOOL, *targets)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(rsa, no passphrase)" in done.stdout
    public = key.with_suffix(".pub").read_text().strip()
    assert (home / ".ssh/authorized_keys").read_text().splitlines() == [public]
    # The modes the guide's steps end with (ssh-keygen makes ~/.ssh 0700).
    assert mode(home / ".ssh") == "0o700" and mode(home / ".ssh/authorized_keys") == "0o600"
    for target in targets:
        batch = subprocess.run(
            ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
             "-o", f"UserKnownHostsFile={tmp_path / 'known_hosts'}", "-i", str(key), target, "true"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert batch.returncode == 0, batch.stderr

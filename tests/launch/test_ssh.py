"""OpenSSH use: batch mode, quoting, and failures explained with a fix."""

from __future__ import annotations

import shlex

import pytest

from ringleader.launch.ssh import SSHOptions, agent_command, classify_failure, ssh_argv


def test_ssh_argv_is_batch_mode_and_never_disables_host_key_checks() -> None:
    argv = ssh_argv("user@host", "true", SSHOptions(config_file="/c"))
    assert argv[:3] == ["ssh", "-F", "/c"]
    assert "BatchMode=yes" in argv
    assert not any("StrictHostKeyChecking" in a for a in argv)
    with pytest.raises(ValueError):
        ssh_argv("-oProxyCommand=evil", "true", SSHOptions())


def test_agent_command_quotes_paths() -> None:
    cmd = agent_command("/opt/my env/bin/python", "/work/it's here", "rl-1")
    assert shlex.quote("/work/it's here") in cmd
    assert "exec '/opt/my env/bin/python' -m ringleader.launch.agent --job-id rl-1" in cmd


@pytest.mark.parametrize(
    ("stderr", "stage", "fix_words"),
    [
        ("ssh: Could not resolve hostname nohost: Name or service not known", "DNS", "host name"),
        ("ssh: connect to host 10.1.1.1 port 22: Connection refused", "connect", "sshd"),
        ("ssh: connect to host 10.1.1.1 port 22: Connection timed out", "connect", "reachable"),
        ("ssh: connect to host 10.1.1.1 port 22: No route to host", "connect", "reachable"),
        ("root@h: Permission denied (publickey,password).", "auth", "ringleader ssh-setup h"),
        (
            "No ED25519 host key is known for h and you have requested strict checking.\n"
            "Host key verification failed.",
            "host key",
            "known_hosts",
        ),
        ("RINGLEADER-MISSING workdir /srv/code", "working directory", "same path"),
        ("RINGLEADER-MISSING interpreter /venv/bin/python", "interpreter", "same Python"),
        ("/venv/bin/python: No module named ringleader.launch.agent", "ringleader", "pip install"),
    ],
)
def test_failures_are_classified_with_a_fix(stderr: str, stage: str, fix_words: str) -> None:
    got_stage, detail, fix = classify_failure("h", stderr)
    assert got_stage == stage
    assert detail
    assert fix_words in fix

"""The CLI inside a pod acts as the workload's submitter, through a token that ends
with the workload (issue 12: never the server's credentials, never an admin's)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.server.conftest import ServerProcess

IN_POD = r"""
import json, os, subprocess, sys
from ringleader.client import Client
from ringleader.errors import Forbidden
print("HOME_SET", "RINGLEADER_HOME" in os.environ, flush=True)
c = Client.connect()
print("ME", c.me().model_dump_json(), flush=True)
listed = subprocess.run([sys.executable, "-m", "ringleader", "list"], capture_output=True, text=True)
print("LIST_RC", listed.returncode, "SEES_SELF", "intoken" in listed.stdout, flush=True)
made = subprocess.run([sys.executable, "-m", "ringleader", "user", "create", "mallory"],
                      capture_output=True, text=True)
print("CREATE_USER_RC", made.returncode, flush=True)
who = subprocess.run([sys.executable, "-m", "ringleader", "whoami"], capture_output=True, text=True)
print("WHO", who.stdout.replace("\n", " | "), flush=True)
print("TOKEN", os.environ["RINGLEADER_TOKEN"], flush=True)
"""


def _as(server: ServerProcess, creds: tuple[str, str], *args: str) -> subprocess.CompletedProcess:
    """The CLI run with another user's access key."""
    return server.cli(*args, creds=creds)


def _wait_logs(server: ServerProcess, creds: tuple[str, str], name: str, word: str) -> str:
    deadline = time.monotonic() + 120
    while True:
        logs = _as(server, creds, "logs", name).stdout
        if word in logs:
            return logs
        assert time.monotonic() < deadline, logs
        time.sleep(0.3)


def test_a_pods_cli_is_its_submitter_and_its_token_ends_with_the_workload(
    server: ServerProcess, tmp_path: Path
) -> None:
    made = server.cli("user", "create", "bob")
    assert made.returncode == 0, made.stderr
    ids = re.search(r"Client ID:\s+(\S+)", made.stdout)
    secret = re.search(r"Client secret:\s+(\S+)", made.stdout)
    assert ids and secret, made.stdout
    bob = (ids.group(1), secret.group(1))
    assert server.cli("user", "assign", "bob", "default", "--role", "researcher").returncode == 0
    script = tmp_path / "in_pod.py"
    script.write_text(IN_POD)

    sub = _as(server, bob, "submit-dist", "pytorch", "intoken", "--workers", "1", "--",
              "python", str(script))  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    logs = _wait_logs(server, bob, "intoken", "TOKEN ")
    assert "HOME_SET False" in logs  # the server's home is not the pod's business
    assert re.search(r"ME .*bob", logs), logs  # the submitter, not the server's admin
    assert "LIST_RC 0 SEES_SELF True" in logs, logs
    assert "Member of: default (researcher)" in logs, logs
    assert "CREATE_USER_RC 0" not in logs and "CREATE_USER_RC" in logs, logs  # not an admin
    token = re.search(r"TOKEN (\S+)", logs)
    assert token is not None

    deadline = time.monotonic() + 120
    while "Completed" not in (listed := _as(server, bob, "list").stdout):
        assert time.monotonic() < deadline, listed
        time.sleep(0.3)
    me = httpx.get(f"{server.url}/api/v1/me", headers={"Authorization": f"Bearer {token.group(1)}"})
    assert me.status_code == 401  # ended with its workload
    env = {**server.env, "RINGLEADER_TOKEN": token.group(1)}
    refused = subprocess.run(
        [sys.executable, "-m", "ringleader", "whoami"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0 and "RINGLEADER_TOKEN was refused" in refused.stderr

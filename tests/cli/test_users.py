"""``ringleader user ...`` and ``ringleader access-key ...`` against a real server
process, as its admin and as a user the admin made; and the client's retry of a 429."""

from __future__ import annotations

import re
import subprocess

import httpx
import pytest

from ringleader.client import Client
from ringleader.errors import TooManyRequests
from tests.server.conftest import ServerProcess


def _as(server: ServerProcess, creds: tuple[str, str], *args: str) -> subprocess.CompletedProcess:
    """The CLI run with another user's access key."""
    return server.cli(*args, creds=creds)


def _secret(out: str) -> tuple[str, str]:
    client_id = re.search(r"Client ID:\s+(\S+)", out)
    secret = re.search(r"Client secret:\s+(\S+)", out)
    assert client_id and secret, out
    return client_id.group(1), secret.group(1)


def test_admin_makes_a_viewer_who_manages_only_its_own_keys(server: ServerProcess) -> None:
    made = server.cli("user", "create", "alice", "--os-user", "alice")
    assert made.returncode == 0, made.stderr
    assert "shown this once" in made.stderr
    alice = _secret(made.stdout)

    bad = server.cli("user", "create", "al ice")
    assert bad.returncode == 2 and "NAME" in bad.stderr, bad.stderr
    bad_os = server.cli("user", "create", "bob", "--os-user", "Bob!")
    assert bad_os.returncode == 2 and "--os-user" in bad_os.stderr, bad_os.stderr

    listed = server.cli("user", "list")
    assert listed.returncode == 0 and re.search(r"alice\s.*\balice\b", listed.stdout)
    assert alice[1] not in listed.stdout and "bob" not in listed.stdout

    wrong_role = server.cli("user", "assign", "alice", "default", "--role", "boss")
    assert wrong_role.returncode == 2 and "--role" in wrong_role.stderr, wrong_role.stderr
    assigned = server.cli("user", "assign", "alice", "default", "--role", "viewer")
    assert assigned.returncode == 0, assigned.stderr
    members = server.cli("project", "members", "default").stdout
    assert re.search(r"alice\s+\S+\s+viewer", members), members

    # Alice reads, and is refused what a viewer may not do.
    assert _as(server, alice, "list").returncode == 0
    refused = _as(server, alice, "submit-dist", "pytorch", "x", "--workers", "1", "--", "true")
    assert refused.returncode == 6 and "viewer" in refused.stderr, refused.stderr
    assert _as(server, alice, "user", "list").returncode == 6

    # Her own keys: the secret printed once, never listed, revoked by name.
    key = _as(server, alice, "access-key", "create", "ci")
    assert key.returncode == 0, key.stderr
    ci = _secret(key.stdout)
    keys = _as(server, alice, "access-key", "list")
    assert re.search(rf"^\s*ci\s+\S+\s+{ci[0]}\b", keys.stdout, re.M), keys.stdout
    assert ci[1] not in keys.stdout and alice[1] not in keys.stdout
    who = _as(server, ci, "whoami").stdout
    assert who.startswith("User: alice") and "Member of: default (viewer)" in who, who
    assert _as(server, alice, "access-key", "revoke", "ci").returncode == 0
    assert _as(server, ci, "whoami").returncode == 6  # the key gives no more tokens
    assert " ci " not in _as(server, alice, "access-key", "list").stdout

    updated = server.cli("user", "update", "alice", "--clear-os-user")
    assert updated.returncode == 0 and "OS user -" in updated.stdout, updated.stderr
    assert server.cli("user", "unassign", "alice", "default").returncode == 0
    assert "alice" not in server.cli("project", "members", "default").stdout
    assert server.cli("user", "delete", "alice").returncode == 0
    assert _as(server, alice, "list").returncode == 6


def _client(handler: httpx.MockTransport) -> Client:
    c = Client("http://ringleader.test", "rl-id", "secret")
    c.http = httpx.Client(base_url=c.url, transport=handler)
    return c


def test_the_client_waits_as_a_429_asks_then_gives_up() -> None:
    answers = [httpx.Response(429, headers={"Retry-After": "0"}, json={"message": "slow down"})]
    answers.append(httpx.Response(200, json={"accessToken": "t", "expiresIn": 60}))
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return answers.pop(0)

    assert _client(httpx.MockTransport(handler)).token() == "t"
    assert seen == ["/api/v1/token", "/api/v1/token"]

    def never(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "3600"}, json={"message": "busy"})

    with pytest.raises(TooManyRequests, match="busy"):
        _client(httpx.MockTransport(never)).token()

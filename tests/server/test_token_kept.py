"""The CLI keeps its bearer token between commands (``client_token_cache``).

Each command used to exchange the access key for a new token: a PBKDF2 check
on the server and a new token row per command.  Real server and CLI processes;
the file's own rules (private, same server and key, time left) as units.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import httpx

from ringleader import client_token_cache as kept
from tests.server.conftest import ServerProcess


def _tokens(server: ServerProcess) -> int:
    with sqlite3.connect(f"file:{server.home / 'ringleader.db'}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM tokens").fetchone()[0])


def test_commands_share_one_token_and_a_revoked_one_is_replaced(server: ServerProcess) -> None:
    assert server.cli("whoami").returncode == 0
    path = server.home / kept.FILE
    first = json.loads(path.read_text())
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    rows = _tokens(server)
    for command in (("whoami",), ("list",), ("project", "list")):
        done = server.cli(*command)
        assert done.returncode == 0, done.stderr
    assert _tokens(server) == rows  # no new token for the three commands
    assert json.loads(path.read_text())["token"] == first["token"]
    # The server ends that token (a logout): the next commands get a new one, once.
    ended = httpx.delete(
        f"{server.url}/api/v1/token", headers={"Authorization": f"Bearer {first['token']}"}
    )
    assert ended.status_code in (200, 204), ended.text
    done = server.cli("logs", "no-such-workload")  # the streaming call retries too
    assert "not found" in (done.stdout + done.stderr).lower(), done.stderr
    assert "unauthorized" not in done.stderr.lower() and "401" not in done.stderr
    second = json.loads(path.read_text())["token"]
    assert second != first["token"]
    assert server.cli("whoami").returncode == 0
    assert json.loads(path.read_text())["token"] == second


def _kept(path: Path, **change: object) -> None:
    entry = {"url": "http://h:1", "clientId": "k", "token": "t", "expiresAt": time.time() + 3600}
    kept_text = json.dumps({**entry, **change})
    path.write_text(kept_text)
    path.chmod(0o600)


def test_a_kept_token_serves_only_its_server_and_key_while_it_has_time(tmp_path: Path) -> None:
    path = tmp_path / kept.FILE
    _kept(path)
    assert kept.load(path, "http://h:1", "k") == "t"
    assert kept.load(path, "http://other:1", "k") is None
    assert kept.load(path, "http://h:1", "another-key") is None
    _kept(path, expiresAt=time.time() + kept.MARGIN_S / 2)  # about to end
    assert kept.load(path, "http://h:1", "k") is None
    _kept(path, token=["not", "a", "string"])
    assert kept.load(path, "http://h:1", "k") is None
    path.write_text("{not json")
    assert kept.load(path, "http://h:1", "k") is None


def test_a_file_others_may_read_or_a_link_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / kept.FILE
    _kept(path)
    path.chmod(0o644)  # written by someone else, or readable by others
    assert kept.load(path, "http://h:1", "k") is None
    target = tmp_path / "elsewhere.json"
    _kept(target)
    path.unlink()
    os.symlink(target, path)
    assert kept.load(path, "http://h:1", "k") is None


def test_saving_writes_a_private_file_and_forgetting_removes_it(tmp_path: Path) -> None:
    path = tmp_path / kept.FILE
    kept.save(path, "http://h:1", "k", "tok", 3600)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert kept.load(path, "http://h:1", "k") == "tok"
    kept.forget(path)
    assert not path.exists()
    kept.save(tmp_path / "missing-dir" / kept.FILE, "http://h:1", "k", "tok", 3600)  # no error

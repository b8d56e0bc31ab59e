"""The token cache (server/token_cache.py): a revoked token is refused at once when
this server revoked it, and after at most ``TTL_S`` when another process did.

Revocations are real: a logout, a deleted key, a deleted user, a user's tokens ended
(Run:ai's logout), a user made admin or not, each through the API; and a token's row
deleted by another process. The cache's clock is a fake one the tests move, so the
bound is checked without waiting for it (and nothing here times anything).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta

import pytest

from ringleader.server import token_cache
from ringleader.server.auth import token_digest
from ringleader.server.db import utcnow
from ringleader.server.token_cache import CACHE, TTL_S, TokenCache
from tests.server.conftest import API

PATH = "/api/v1/workloads/distributed"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """The server's cache on a clock the test moves (``clock[0]``), emptied first."""
    now = [1000.0]
    monkeypatch.setattr(CACHE, "clock", lambda: now[0])
    CACHE.clear()
    yield now
    CACHE.clear()


def _me(api: API, headers: dict[str, str]) -> int:
    return api.client.get("/api/v1/me", headers=headers).status_code


def _remembered(headers: dict[str, str]) -> bool:
    return CACHE.get(token_digest(headers["Authorization"].split(" ", 1)[1])) is not None


def _submit(api: API, headers: dict[str, str], name: str, command: str = "x") -> int:
    """A submission's status (to the default project, by its name: no lookup first)."""
    body = {"name": name, "projectId": "default", "spec": {"command": command, "numWorkers": 1}}
    return api.client.post(PATH, json=body, headers=headers).status_code


def test_a_logout_here_is_refused_at_once(api: API, clock: list[float]) -> None:
    assert _me(api, api.headers) == 200
    assert _remembered(api.headers)
    assert api.delete("/api/v1/token").status_code == 204
    assert _me(api, api.headers) == 401
    assert _submit(api, api.headers, "after-logout") == 401


@pytest.mark.parametrize("revoke", ["user deleted", "user logged out", "key revoked"])
def test_a_revocation_through_the_api_is_refused_at_once(
    api: API, clock: list[float], revoke: str
) -> None:
    bob = api.new_user("bob")
    assert _me(api, bob) == 200
    assert _remembered(bob)
    if revoke == "user deleted":
        answer = api.delete("/api/v1/users/bob")
    elif revoke == "user logged out":
        answer = api.post("/api/v1/users/bob/logout")
    else:
        keys = api.client.get("/api/v1/access-keys", headers=bob).json()["accessKeys"]
        answer = api.delete(f"/api/v1/access-keys/{keys[0]['id']}")
    assert answer.status_code == 204, answer.text
    assert _me(api, bob) == 401
    assert _submit(api, bob, "after-revocation") == 401


def test_a_user_made_admin_is_an_admin_at_once(api: API, clock: list[float]) -> None:
    bob = api.new_user("bob")
    assert api.client.get("/api/v1/me", headers=bob).json()["isAdmin"] is False
    assert _remembered(bob)
    assert api.put("/api/v1/users/bob", json={"isAdmin": True}).status_code == 200
    assert api.client.get("/api/v1/me", headers=bob).json()["isAdmin"] is True


def test_a_token_deleted_by_another_process_is_refused_within_the_bound(
    api: API, clock: list[float]
) -> None:
    assert _me(api, api.headers) == 200
    assert _remembered(api.headers)
    url = api.client.app.state.config.resolved_database_url()
    delete = (
        "import sys\n"
        "from sqlalchemy import create_engine, text\n"
        "with create_engine(sys.argv[1]).begin() as c:\n"
        "    n = c.execute(text('DELETE FROM tokens WHERE token_hash = :h'), {'h': sys.argv[2]})\n"
        "    assert n.rowcount == 1\n"
    )
    digest = token_digest(api.token)
    subprocess.run([sys.executable, "-c", delete, url, digest], check=True, timeout=120)
    # This process saw no write: the memory answers until its entry is TTL_S old ...
    assert _me(api, api.headers) == 200
    clock[0] += TTL_S
    # ... and not a moment after.
    assert _me(api, api.headers) == 401
    assert _submit(api, api.headers, "after-the-bound") == 401


def test_pod_tokens_are_never_remembered(api: API, clock: list[float]) -> None:
    from ringleader.server.auth import issue_pod_token
    from ringleader.server.models import Workload

    # A pod token acts only while its workload lives, and each start issues the pods'
    # own (revoking any earlier): one that has started and runs on.
    assert _submit(api, api.headers, "w", command="sleep 600") == 202
    with api.client.app.state.sessions() as s:
        workload_id = s.query(Workload.id).scalar()
    api.wait_phase(workload_id, {"Running"})
    with api.client.app.state.sessions() as s, s.begin():
        workload = s.query(Workload).one()
        pod = {"Authorization": f"Bearer {issue_pod_token(s, workload, 600)}"}
    assert _me(api, pod) == 200
    assert not _remembered(pod)


# ----- the cache alone -------------------------------------------------------------


def _cache() -> tuple[TokenCache, list[float]]:
    now = [0.0]
    return TokenCache(ttl_s=1.0, clock=lambda: now[0]), now


def test_an_entry_is_used_until_it_is_ttl_old() -> None:
    cache, now = _cache()
    cache.put("d", "user", utcnow() + timedelta(hours=1), cache.generation())
    now[0] = 0.999
    assert cache.get("d") is not None
    now[0] = 1.0
    assert cache.get("d") is None


def test_nothing_is_stored_while_a_change_is_open_or_by_a_lookup_older_than_one() -> None:
    cache, _ = _cache()
    expires = utcnow() + timedelta(hours=1)
    before = cache.generation()
    cache.change_began()
    cache.put("during", "user", expires, cache.generation())
    assert cache.get("during") is None  # a change is open: what was read may be gone
    cache.change_ended()
    cache.put("older", "user", expires, before)
    assert cache.get("older") is None  # the lookup began before the change ended
    cache.put("after", "user", expires, cache.generation())
    assert cache.get("after") is not None


def test_a_change_empties_it() -> None:
    cache, _ = _cache()
    cache.put("d", "user", utcnow() + timedelta(hours=1), cache.generation())
    cache.change_began()
    assert cache.get("d") is None and len(cache) == 0


def test_it_holds_at_most_max_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_cache, "MAX_ENTRIES", 3)
    cache, _ = _cache()
    for n in range(5):
        cache.put(f"d{n}", "user", utcnow() + timedelta(hours=1), cache.generation())
    assert len(cache) == 3 and cache.get("d0") is None and cache.get("d4") is not None


@pytest.mark.parametrize(
    ("statement", "watched"),
    [
        ("DELETE FROM tokens WHERE tokens.token_hash = ?", True),
        ("DELETE FROM tokens WHERE tokens.id IN (?, ?)", True),
        ('UPDATE "users" SET is_admin=%(is_admin)s WHERE users.id = %(id_1)s', True),
        ("DELETE FROM access_keys WHERE access_keys.id = ?", True),
        ("UPDATE access_keys SET last_used_at=? WHERE access_keys.id = ?", True),
        ("DELETE FROM users WHERE users.id = ?", True),
        ("DELETE FROM tokens WHERE tokens.workload_id = ?", False),  # pod tokens only
        ("INSERT INTO tokens (id, token_hash) VALUES (?, ?)", False),  # a new row
        ("UPDATE workloads SET phase=? WHERE workloads.id = ?", False),
        ("SELECT users.id FROM users", False),
    ],
)
def test_which_statements_are_changes(statement: str, watched: bool) -> None:
    assert token_cache._writes_watched(statement) is watched

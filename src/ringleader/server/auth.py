"""Credentials: access keys (client id + secret) and bearer tokens.

Invariants:
- secrets are stored only as PBKDF2 hashes; tokens (random, high entropy)
  only as SHA-256 digests, so a copied database grants nothing;
- a token is shaped like a JWT (``header.claims.secret``, base64url) whose
  claims carry ``sub`` (the user's id), ``iat`` and ``exp``: clients that
  schedule their renewal by ``exp`` (Run:ai's ``runapy``) read it; the third
  part is 256 random bits, not a signature: the server checks a token by its
  digest in the database, never by what its claims say, so revoking works
  as before and a client can forge nothing;
- tokens expire (``expires_at``); an expired, revoked or unknown token is a
  401; a token names the key it was issued for, so revoking (deleting) the
  key ends its tokens (ON DELETE CASCADE); expired rows are purged a bounded
  batch at a time, whenever a token is issued;
- checking credentials costs the same for an unknown client id as for a
  known one (a dummy hash is verified), so ids cannot be told apart by time;
- a *pod token* (``issue_pod_token``: the token a workload's pods get) is its
  submitter's, confined to the workload's project: ``user_for_token`` records
  that project in the request's ``session.info`` (``pod_project``), which the
  role checks and the API's route gate read (no access keys, users, tokens or
  memberships, no other project's workloads, an admin's no more than a
  researcher's); it is refused once its workload ends (revoked, and checked);
- the first start creates an admin with one access key and writes it to a
  credentials file readable only by its owner (0600).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import delete, inspect, select, update
from sqlalchemy.orm import Session, make_transient_to_detached

from ringleader.errors import Unauthorized
from ringleader.server.db import utcnow
from ringleader.server.models import AccessKey, Project, ProjectMember, Token, User, Workload
from ringleader.server.token_cache import CACHE, TokenCache, watch

watch()  # every write to users, tokens or access_keys in this process empties the cache

PBKDF2_ROUNDS = 120_000
DEFAULT_PROJECT = "default"
PURGE_BATCH = 500  # expired tokens deleted per token issued: bounded work per request
# session.info's key for the project a pod token confines a request to (pod_project).
POD_PROJECT = "ringleader.pod_project"
# A workload in one of these phases has ended (phases.WORKLOAD_ENDED, which
# imports this module) or is going: its pods' token no longer acts.
POD_TOKEN_ENDS = frozenset({"Completed", "Failed", "Stopped", "Deleting", "Deleted"})


def hash_secret(secret: str) -> str:
    salt = secrets.token_hex(16)
    digest = hashlib.pbkdf2_hmac("sha256", secret.encode(), bytes.fromhex(salt), PBKDF2_ROUNDS)
    return f"pbkdf2_sha256${PBKDF2_ROUNDS}${salt}${digest.hex()}"


def verify_secret(secret: str, stored: str) -> bool:
    try:
        scheme, rounds, salt, expected = stored.split("$")
    except ValueError:
        return False
    if scheme != "pbkdf2_sha256":
        return False
    digest = hashlib.pbkdf2_hmac("sha256", secret.encode(), bytes.fromhex(salt), int(rounds))
    return hmac.compare_digest(digest.hex(), expected)


@functools.cache
def dummy_hash() -> str:
    """A hash no secret matches, verified for unknown client ids: the same work
    (and time) as a known id with a wrong secret."""
    return hash_secret(secrets.token_urlsafe(32))


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


_JWT_HEADER = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())


def new_token(user_id: str, issued_at: datetime, expires_at: datetime) -> str:
    """A bearer token shaped like a JWT: its claims say whose it is and when it
    expires (for clients); its last part is the secret (for the server).

    The claims are ASCII without ``>``, ``?`` or ``~``, so their base64url form is
    also valid standard base64: ``runapy`` decodes it with ``base64.b64decode``.
    """
    claims = {
        "iss": "ringleader",
        "sub": user_id,
        "iat": int(issued_at.timestamp()),
        "exp": int(expires_at.timestamp()),
    }
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    return f"{_JWT_HEADER}.{payload}.{secrets.token_urlsafe(32)}"


@dataclass(frozen=True)
class IssuedKey:
    client_id: str
    client_secret: str  # shown once, never stored
    row: AccessKey = field(compare=False, repr=False)


@dataclass(frozen=True)
class IssuedToken:
    token: str
    expires_at: datetime


def create_access_key(session: Session, user: User, name: str = "") -> IssuedKey:
    """A new key for ``user`` (added, not committed); its secret is in the result only."""
    client_id, secret = f"rl-{secrets.token_hex(8)}", secrets.token_urlsafe(32)
    row = AccessKey(
        user_id=user.id, client_id=client_id, secret_hash=hash_secret(secret), name=name
    )
    session.add(row)
    return IssuedKey(client_id=client_id, client_secret=secret, row=row)


def check_access_key(
    session: Session,
    client_id: str,
    client_secret: str,
    verify: Callable[[str, str], bool] = verify_secret,
) -> AccessKey:
    """The access key these credentials name, or Unauthorized.

    Slow on purpose (PBKDF2): call it on a reader session, so that guessing
    secrets never holds the write lock. An unknown id verifies the secret
    against ``dummy_hash()``: the same work as a known id, the same answer.
    """
    key = session.scalar(select(AccessKey).where(AccessKey.client_id == client_id))
    matches = verify(client_secret, key.secret_hash if key is not None else dummy_hash())
    if key is None or not matches:
        raise Unauthorized("invalid clientID or clientSecret")
    return key


def record_token(session: Session, key: AccessKey, ttl_s: int) -> IssuedToken:
    """A new bearer token for ``key``'s user (stored hashed); the key's last use;
    a bounded batch of expired tokens purged."""
    now = utcnow()
    purge_expired(session, now)
    session.execute(update(AccessKey).where(AccessKey.id == key.id).values(last_used_at=now))
    expires = now + timedelta(seconds=ttl_s)
    token = new_token(key.user_id, now, expires)
    session.add(
        Token(
            user_id=key.user_id,
            access_key_id=key.id,
            token_hash=token_digest(token),
            expires_at=expires,
        )
    )
    return IssuedToken(token=token, expires_at=expires)


def purge_expired(session: Session, now: datetime, limit: int = PURGE_BATCH) -> int:
    """Delete up to ``limit`` expired tokens (a token issued per request keeps up
    with any rate tokens are issued at); how many went."""
    doomed = select(Token.id).where(Token.expires_at <= now).limit(limit)
    ids = list(session.scalars(doomed))
    if ids:
        session.execute(delete(Token).where(Token.id.in_(ids)))
    return len(ids)


def revoke_token(session: Session, token: str) -> bool:
    """Delete the token (a logout); whether it existed."""
    result = session.execute(delete(Token).where(Token.token_hash == token_digest(token)))
    return bool(getattr(result, "rowcount", 0))


def issue_pod_token(session: Session, workload: Workload, ttl_s: int) -> str | None:
    """A token of the workload's submitter for its pods (the ``ringleader`` CLI in a
    pod acts as that user, nobody else); it replaces the last start's and ends with
    the workload (``revoke_pod_tokens``).  None when no user submitted it."""
    if workload.created_by is None:
        return None
    revoke_pod_tokens(session, workload.id)
    now = utcnow()
    expires = now + timedelta(seconds=ttl_s)
    token = new_token(workload.created_by, now, expires)
    session.add(
        Token(
            user_id=workload.created_by,
            workload_id=workload.id,
            token_hash=token_digest(token),
            expires_at=expires,
        )
    )
    return token


def revoke_pod_tokens(session: Session, workload_id: str) -> None:
    session.execute(delete(Token).where(Token.workload_id == workload_id))


def user_for_token(session: Session, token: str, cache: TokenCache | None = CACHE) -> User:
    """The token's user, in one query (every API call makes it), or none at all when
    ``cache`` (``token_cache``: its docstring states how soon a revocation is seen)
    verified this token a moment ago: the remembered user is merged into ``session``.

    A pod token confines ``session`` to its workload's project (``pod_project``);
    one whose workload has ended or gone is refused even if a revocation was
    missed (a deleted workload's tokens also go with its row)."""
    digest = token_digest(token)
    entry = cache.get(digest) if cache is not None else None
    if entry is not None:
        if entry.expires_at <= utcnow():
            raise Unauthorized(EXPIRED)
        return session.merge(entry.user, load=False)
    fresh = not session.in_transaction()  # a snapshot taken earlier may predate a change
    generation = cache.generation() if cache is not None else 0
    row = session.execute(
        select(User, Token.expires_at, Token.workload_id, Workload.project_id, Workload.phase)
        .join(Token, Token.user_id == User.id)
        .outerjoin(Workload, Workload.id == Token.workload_id)
        .where(Token.token_hash == digest)
    ).first()
    if row is None:
        raise Unauthorized("invalid token")
    user, expires_at, workload_id, project_id, phase = row
    if expires_at <= utcnow():
        raise Unauthorized(EXPIRED)
    if workload_id is not None:
        if project_id is None or phase in POD_TOKEN_ENDS:
            raise Unauthorized("invalid token: its workload has ended")
        session.info[POD_PROJECT] = project_id
    elif cache is not None and fresh:
        cache.put(digest, detached_copy(user), expires_at, generation)
    return user


EXPIRED = "token expired; get a new one with `ringleader token` or POST /api/v1/token"


def detached_copy(user: User) -> User:
    """A copy of ``user``'s row that belongs to no session (what the cache keeps)."""
    copy = User(**{a.key: getattr(user, a.key) for a in inspect(User).column_attrs})
    make_transient_to_detached(copy)
    return copy


def pod_project(session: Session) -> str | None:
    """The project a pod token confines this request's session to; None for any
    other caller (a user's own token, the server's loops)."""
    return session.info.get(POD_PROJECT)


def write_credentials(path: Path, url: str, key: IssuedKey) -> None:
    """Write credentials readable by the owner only (created 0600, never widened)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = json.dumps(
        {"url": url, "clientId": key.client_id, "clientSecret": key.client_secret}, indent=2
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(data + "\n")
    os.chmod(path, 0o600)


def bootstrap(session: Session, credentials_path: Path, url: str) -> IssuedKey | None:
    """First start: an admin user, its access key (written to a 0600 file) and a default project."""
    if session.scalar(select(User).limit(1)) is not None:
        return None
    admin = User(name="admin", is_admin=True)
    session.add(admin)
    session.flush()
    key = create_access_key(session, admin, name="bootstrap")
    project = Project(name=DEFAULT_PROJECT, resources=[])
    session.add(project)
    session.flush()
    session.add(ProjectMember(project_id=project.id, user_id=admin.id, role="admin"))
    write_credentials(credentials_path, url, key)
    return key

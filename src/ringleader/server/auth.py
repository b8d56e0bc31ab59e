"""Credentials: access keys (client id + secret) and bearer tokens.

Invariants:
- secrets are stored only as PBKDF2 hashes; tokens (random, high entropy)
  only as SHA-256 digests, so a copied database grants nothing;
- tokens expire (``expires_at``); an expired or unknown token is a 401;
- the first start creates an admin with one access key and writes it to a
  credentials file readable only by its owner (0600).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ringleader.errors import Unauthorized
from ringleader.server.db import utcnow
from ringleader.server.models import AccessKey, Project, ProjectMember, Token, User

PBKDF2_ROUNDS = 120_000
DEFAULT_PROJECT = "default"


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


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedKey:
    client_id: str
    client_secret: str


@dataclass(frozen=True)
class IssuedToken:
    token: str
    expires_at: datetime


def create_access_key(session: Session, user: User) -> IssuedKey:
    key = IssuedKey(client_id=f"rl-{secrets.token_hex(8)}", client_secret=secrets.token_urlsafe(32))
    session.add(
        AccessKey(
            user_id=user.id, client_id=key.client_id, secret_hash=hash_secret(key.client_secret)
        )
    )
    return key


def check_access_key(session: Session, client_id: str, client_secret: str) -> AccessKey:
    """The access key these credentials name, or Unauthorized.

    Slow on purpose (PBKDF2): call it on a reader session, so that guessing
    secrets never holds the write lock.
    """
    key = session.scalar(select(AccessKey).where(AccessKey.client_id == client_id))
    if key is None or not verify_secret(client_secret, key.secret_hash):
        raise Unauthorized("invalid clientID or clientSecret")
    return key


def record_token(session: Session, key: AccessKey, ttl_s: int) -> IssuedToken:
    """A new bearer token for ``key``'s user (stored hashed); the key's last use."""
    now = utcnow()
    session.execute(update(AccessKey).where(AccessKey.id == key.id).values(last_used_at=now))
    token = secrets.token_urlsafe(32)
    expires = now + timedelta(seconds=ttl_s)
    session.add(Token(user_id=key.user_id, token_hash=token_digest(token), expires_at=expires))
    return IssuedToken(token=token, expires_at=expires)


def user_for_token(session: Session, token: str) -> User:
    """The token's user, in one query (every API call makes it)."""
    row = session.execute(
        select(User, Token.expires_at)
        .join(Token, Token.user_id == User.id)
        .where(Token.token_hash == token_digest(token))
    ).first()
    if row is None:
        raise Unauthorized("invalid token")
    user, expires_at = row
    if expires_at <= utcnow():
        raise Unauthorized(
            "token expired; get a new one with `ringleader token` or POST /api/v1/token"
        )
    return user


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
    key = create_access_key(session, admin)
    project = Project(name=DEFAULT_PROJECT, resources=[])
    session.add(project)
    session.flush()
    session.add(ProjectMember(project_id=project.id, user_id=admin.id))
    write_credentials(credentials_path, url, key)
    return key

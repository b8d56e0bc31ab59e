"""Bearer tokens for client credentials (POST /api/v1/token) and their revocation.

Issuing is slow on purpose (PBKDF2), so it runs on the key-check threads
(``ratelimit.KeyChecks``), never on the event loop nor on the threads every
other route runs on; the route applies the rate limits first.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from sqlalchemy.orm import Session

from ringleader.server.auth import check_access_key, record_token, revoke_token
from ringleader.server.schemas import TokenRequest, TokenResponse

Sessions = Callable[[], AbstractContextManager[Session]]


def issue_token(
    readers: Sessions, writers: Sessions, body: TokenRequest, ttl_s: int
) -> TokenResponse:
    """Check the key on a reader (the slow hash never holds the write lock), then
    record the token (and purge some expired ones) in a short write transaction."""
    with readers() as reader:
        key = check_access_key(reader, body.client_id, body.client_secret)
    with writers() as session, session.begin():
        issued = record_token(session, key, ttl_s)
    return TokenResponse(access_token=issued.token, expires_in=ttl_s)


def revoke(session: Session, token: str) -> None:
    """End the token the caller presented (a logout): it is a 401 from now on."""
    revoke_token(session, token)
    session.commit()

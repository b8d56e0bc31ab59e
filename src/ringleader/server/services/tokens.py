"""Bearer tokens for client credentials (POST /api/v1/token)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from sqlalchemy.orm import Session

from ringleader.server.auth import check_access_key, record_token
from ringleader.server.schemas import TokenRequest, TokenResponse

Sessions = Callable[[], AbstractContextManager[Session]]


def issue_token(
    readers: Sessions, writers: Sessions, body: TokenRequest, ttl_s: int
) -> TokenResponse:
    """Check the key on a reader (the slow hash never holds the write lock), then
    record the token in a short write transaction."""
    with readers() as reader:
        key = check_access_key(reader, body.client_id, body.client_secret)
    with writers() as session, session.begin():
        issued = record_token(session, key, ttl_s)
    return TokenResponse(access_token=issued.token, expires_in=ttl_s)

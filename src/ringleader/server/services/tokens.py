"""Bearer tokens for client credentials (POST /api/v1/token) and their revocation.

Issuing is slow on purpose (PBKDF2), so it runs on the key-check threads
(``ratelimit.KeyChecks``), never on the event loop nor on the threads every
other route runs on; the route applies the rate limits first.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy.orm import Session

from ringleader.errors import Unauthorized
from ringleader.server.auth import check_access_key, record_token, revoke_token
from ringleader.server.ratelimit import RateLimited
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


async def issue_limited(state: Any, body: TokenRequest, address: str, ttl_s: int) -> TokenResponse:
    """``issue_token`` behind the token endpoint's bounds, for every door that takes an
    access key (POST /api/v1/token, the web UI's login): the rate limits per address
    and client id (a refusal is held before it is answered, so a flood costs no CPU),
    the slow check on the key-check threads, a failure counted against both.
    ``state``: the app's state (``token_limits``, ``key_checks``, the sessions)."""
    try:
        state.token_limits.check(body.client_id, address)
    except RateLimited as refused:
        await state.token_limits.hold(refused)
        raise
    try:
        return await state.key_checks.run(issue_token, state.readers, state.sessions, body, ttl_s)
    except Unauthorized:
        state.token_limits.failed(body.client_id, address)
        raise


def revoke(session: Session, token: str) -> None:
    """End the token the caller presented (a logout): it is a 401 from now on."""
    revoke_token(session, token)
    session.commit()

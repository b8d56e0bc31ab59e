"""Request-scoped dependencies: the DB session and the caller."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from ringleader.errors import Unauthorized
from ringleader.server.auth import user_for_token
from ringleader.server.models import User

bearer = HTTPBearer(auto_error=False, description="Bearer token from POST /api/v1/token")


READ_METHODS = frozenset({"GET", "HEAD"})


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; the route commits what it changed.

    GET and HEAD get a reader session, so they never wait for (or hold) the
    write lock; every other method gets a writer session.
    """
    state = request.app.state
    sessions = state.readers if request.method in READ_METHODS else state.sessions
    with sessions() as session:
        yield session


def bearer_token(
    credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
) -> str:
    """The bearer token of the ``Authorization`` header, unchecked; 401 when none."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized(
            "missing bearer token; get one with `ringleader token` or POST /api/v1/token"
        )
    return credentials.credentials


def current_user(
    token: str = Depends(bearer_token), session: Session = Depends(get_session)
) -> User:
    """The caller: the user of a valid, unexpired, unrevoked token (else 401)."""
    return user_for_token(session, token)

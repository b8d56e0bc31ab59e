"""POST /api/v1/token (client credentials -> bearer token), DELETE /api/v1/token
(revoke the token presented) and GET /api/v1/me."""

from __future__ import annotations

import anyio
from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy.orm import Session

from ringleader.server.deps import (
    Verified,
    bearer_token,
    current_user,
    get_session,
    verified_caller,
)
from ringleader.server.models import User
from ringleader.server.schemas import MeOut, TokenRequest, TokenResponse
from ringleader.server.services import tokens, views

router = APIRouter(prefix="/api/v1", tags=["auth"])


@router.post("/token", response_model=TokenResponse, response_model_by_alias=True)
async def token(body: TokenRequest, request: Request) -> TokenResponse:
    """Rate limited per source address and client id (429 with Retry-After); the
    key check runs on its own few threads, off the event loop."""
    address = request.client.host if request.client else ""
    state = request.app.state
    return await tokens.issue_limited(state, body, address, state.config.token_ttl_s)


@router.delete("/token", status_code=204)
def revoke(
    token: str = Depends(bearer_token),
    user: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> Response:
    tokens.revoke(s, token)
    return Response(status_code=204)


@router.get("/me", response_model=MeOut, response_model_by_alias=True)
async def me(request: Request, who: Verified = Depends(verified_caller)) -> MeOut:
    # One worker thread, one reader session: the floor every authenticated call pays,
    # so it pays no more (the token check is the cache's, on the loop when it knows it).

    def read() -> MeOut:
        with request.app.state.readers() as s:
            return views.me(s, who.attach(s))

    return await anyio.to_thread.run_sync(read)

"""POST /api/v1/token (client credentials -> bearer token) and GET /api/v1/me."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from sqlalchemy.orm import Session

from ringleader.server.deps import current_user, get_session
from ringleader.server.models import User
from ringleader.server.schemas import MeOut, TokenRequest, TokenResponse
from ringleader.server.services import views
from ringleader.server.services.tokens import issue_token

router = APIRouter(prefix="/api/v1", tags=["auth"])


@router.post("/token", response_model=TokenResponse, response_model_by_alias=True)
def token(body: TokenRequest, request: Request) -> TokenResponse:
    state = request.app.state
    return issue_token(state.readers, state.sessions, body, state.config.token_ttl_s)


@router.get("/me", response_model=MeOut, response_model_by_alias=True)
def me(user: User = Depends(current_user), session: Session = Depends(get_session)) -> MeOut:
    return views.me(session, user)

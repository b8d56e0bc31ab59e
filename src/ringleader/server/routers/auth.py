"""POST /api/v1/token (client credentials -> bearer token) and GET /api/v1/me."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.server.auth import check_access_key, record_token
from ringleader.server.deps import current_user, get_session
from ringleader.server.models import Project, ProjectMember, User
from ringleader.server.schemas import MeOut, TokenRequest, TokenResponse

router = APIRouter(prefix="/api/v1", tags=["auth"])


@router.post("/token", response_model=TokenResponse, response_model_by_alias=True)
def token(body: TokenRequest, request: Request) -> TokenResponse:
    """Checked on a reader (the slow hash never holds the write lock), then recorded."""
    state = request.app.state
    ttl = state.config.token_ttl_s
    with state.readers() as reader:
        key = check_access_key(reader, body.client_id, body.client_secret)
    with state.sessions() as session, session.begin():
        issued = record_token(session, key, ttl)
    return TokenResponse(access_token=issued.token, expires_in=ttl)


@router.get("/me", response_model=MeOut, response_model_by_alias=True)
def me(user: User = Depends(current_user), session: Session = Depends(get_session)) -> MeOut:
    projects = session.scalars(
        select(Project.name).join(ProjectMember).where(ProjectMember.user_id == user.id)
    )
    return MeOut(id=user.id, name=user.name, is_admin=user.is_admin, projects=sorted(projects))

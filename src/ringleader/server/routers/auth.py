"""POST /api/v1/token (client credentials -> bearer token) and GET /api/v1/me."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.server.auth import issue_token
from ringleader.server.deps import current_user, get_session
from ringleader.server.models import Project, ProjectMember, User
from ringleader.server.schemas import MeOut, TokenRequest, TokenResponse

router = APIRouter(prefix="/api/v1", tags=["auth"])


@router.post("/token", response_model=TokenResponse, response_model_by_alias=True)
def token(
    body: TokenRequest, request: Request, session: Session = Depends(get_session)
) -> TokenResponse:
    ttl = request.app.state.config.token_ttl_s
    issued = issue_token(session, body.client_id, body.client_secret, ttl)
    session.commit()
    return TokenResponse(access_token=issued.token, expires_in=ttl)


@router.get("/me", response_model=MeOut, response_model_by_alias=True)
def me(user: User = Depends(current_user), session: Session = Depends(get_session)) -> MeOut:
    projects = session.scalars(
        select(Project.name).join(ProjectMember).where(ProjectMember.user_id == user.id)
    )
    return MeOut(id=user.id, name=user.name, is_admin=user.is_admin, projects=sorted(projects))

"""/api/v1/users (global admins; a user may read itself and log itself out) and
/api/v1/access-keys (each user's own), in Run:ai's shapes."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from sqlalchemy.orm import Session

from ringleader.server.deps import current_user, get_session
from ringleader.server.models import User
from ringleader.server.schemas import (
    AccessKeyCreated,
    AccessKeyIn,
    AccessKeyList,
    AccessKeyOut,
    UserCreated,
    UserIn,
    UserOut,
    UserUpdate,
)
from ringleader.server.services import users

router = APIRouter(prefix="/api/v1", tags=["users"])
_BY_ALIAS = {"response_model_by_alias": True}


@router.post("/users", status_code=201, response_model=UserCreated, **_BY_ALIAS)
def create(
    body: UserIn, caller: User = Depends(current_user), s: Session = Depends(get_session)
) -> UserCreated:
    """A new user and its first access key: the secret is in this answer only."""
    return users.create(s, caller, body)


@router.get("/users", response_model=list[UserOut], **_BY_ALIAS)
def list_all(
    caller: User = Depends(current_user), s: Session = Depends(get_session)
) -> list[UserOut]:
    return users.list_users(s, caller)


@router.get("/users/{key}", response_model=UserOut, **_BY_ALIAS)
def get(
    key: str, caller: User = Depends(current_user), s: Session = Depends(get_session)
) -> UserOut:
    return users.get(s, caller, key)


@router.put("/users/{key}", response_model=UserOut, **_BY_ALIAS)
def update(
    key: str,
    body: UserUpdate,
    caller: User = Depends(current_user),
    s: Session = Depends(get_session),
) -> UserOut:
    return users.update(s, caller, key, body)


@router.delete("/users/{key}", status_code=204)
def delete(
    key: str, caller: User = Depends(current_user), s: Session = Depends(get_session)
) -> Response:
    users.remove(s, caller, key)
    return Response(status_code=204)


@router.post("/users/{key}/logout", status_code=204)
def logout(
    key: str, caller: User = Depends(current_user), s: Session = Depends(get_session)
) -> Response:
    """End every token of the user (Run:ai's logout); its access keys stay."""
    users.logout(s, caller, key)
    return Response(status_code=204)


@router.post("/access-keys", status_code=201, response_model=AccessKeyCreated, **_BY_ALIAS)
def create_key(
    body: AccessKeyIn, caller: User = Depends(current_user), s: Session = Depends(get_session)
) -> AccessKeyCreated:
    """A new access key of the caller's: the secret is in this answer only."""
    return users.create_key(s, caller, body)


@router.get("/access-keys", response_model=AccessKeyList, **_BY_ALIAS)
def list_keys(
    caller: User = Depends(current_user), s: Session = Depends(get_session)
) -> AccessKeyList:
    return users.list_keys(s, caller)


@router.get("/access-keys/{key_id}", response_model=AccessKeyOut, **_BY_ALIAS)
def get_key(
    key_id: str, caller: User = Depends(current_user), s: Session = Depends(get_session)
) -> AccessKeyOut:
    return users.get_key(s, caller, key_id)


@router.delete("/access-keys/{key_id}", status_code=204)
def revoke_key(
    key_id: str, caller: User = Depends(current_user), s: Session = Depends(get_session)
) -> Response:
    """Revoke the key: no new tokens for it, and the tokens it gave end now."""
    users.revoke_key(s, caller, key_id)
    return Response(status_code=204)

"""Wire schemas of who may call the API: users, their project memberships,
their access keys, and the token an access key is exchanged for.

Why apart from ``schemas``: these are the bodies of the account endpoints
(``routers/auth``, ``routers/users``, a project's members; ``services/users``,
``services/roles``), which share no shape with the project, workload, pod, event
and node responses there.
``schemas`` re-exports every public name, so imports from it still work.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field

from ringleader.server.wire_base import NO_NUL, Wire


class TokenRequest(BaseModel):
    """Run:ai's token request: an access key as ``clientID``/``clientSecret``
    (``client_credentials``) or as an application's ``appID``/``appSecret``
    (``app_token``; Run:ai's Python client spells them ``AppId``/``AppSecret``).
    Either spelling works with either grant; Run:ai's other fields are ignored."""

    grant_type: Literal["client_credentials", "app_token"] = Field(
        "client_credentials", alias="grantType"
    )
    # Bounded: the rate limiter keeps client ids, and every byte of a secret is hashed.
    client_id: str = Field(
        validation_alias=AliasChoices("clientID", "appID", "AppId"),
        min_length=1,
        max_length=255,
        pattern=NO_NUL,
    )
    client_secret: str = Field(
        validation_alias=AliasChoices("clientSecret", "appSecret", "AppSecret"),
        min_length=1,
        max_length=1024,
        pattern=NO_NUL,
    )


class TokenResponse(Wire):
    access_token: str
    token_type: str = "Bearer"
    expires_in: int


class MeOut(Wire):
    id: str
    name: str
    is_admin: bool
    projects: list[str]
    roles: dict[str, str] = Field(default_factory=dict)  # project name -> the caller's role


# ----- users, project members, access keys -----

USER_NAME = r"^[A-Za-z0-9][A-Za-z0-9._@+-]*$"  # a login name or an email address
POSIX_USER = r"^[a-z_][a-z0-9_-]*$"  # useradd's portable user names (at most 32 bytes)
KEY_NAME = r"^[a-z][-_a-z0-9]*[a-z0-9]$"  # Run:ai's access key names


class UserIn(Wire):
    username: str = Field(min_length=1, max_length=255, pattern=USER_NAME)
    is_admin: bool = False  # a global admin: manages users, projects and nodes
    os_user: str | None = Field(None, min_length=1, max_length=32, pattern=POSIX_USER)


class UserUpdate(Wire):
    """Only the fields given change; ``"osUser": null`` clears it."""

    is_admin: bool | None = None
    os_user: str | None = Field(None, min_length=1, max_length=32, pattern=POSIX_USER)


class MembershipOut(Wire):
    project_id: str
    project_name: str
    role: str


class UserOut(Wire):
    id: str
    username: str
    is_admin: bool
    os_user: str | None = None
    created_at: datetime
    projects: list[MembershipOut] = Field(default_factory=list)


class UserCreated(UserOut):
    """A new user and its first access key; the secret is shown this once."""

    client_id: str
    client_secret: str


class MemberIn(Wire):
    role: Literal["admin", "researcher", "viewer"] = "researcher"


class MemberOut(Wire):
    user_id: str
    username: str
    role: str


class AccessKeyIn(Wire):
    name: str = Field(min_length=2, max_length=255, pattern=KEY_NAME)


class AccessKeyOut(Wire):
    id: str
    name: str
    client_id: str
    created_at: datetime
    last_login: datetime | None = None  # when a token was last issued for it


class AccessKeyCreated(AccessKeyOut):
    client_secret: str  # shown this once; only its hash is stored


class AccessKeyList(Wire):
    access_keys: list[AccessKeyOut]

"""The web UI's session: a login with an access key becomes a cookie.

Why a cookie holding a bearer token: a session is then a row of the tokens
table (stored as a digest, expiring, revoked by logout or by deleting its
access key), so the UI and the API share one credential store and one check
(``auth.user_for_token``).  The cookie is HttpOnly (no script reads it),
SameSite=Strict (a cross-site request carries none) and Secure over TLS.

CSRF, in depth: every state-changing UI request must carry the session's CSRF
token (form field ``csrf_token`` or header ``X-CSRF-Token``), a digest of the
session token that no other site can compute, and must not say it comes from
another origin (``Origin``, ``Sec-Fetch-Site``).  The login form, before there
is a session, uses a double-submitted random cookie instead.  The JSON API
never reads the cookie, so it needs none of this.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import quote, urlsplit

from fastapi import Depends, Request, Response
from fastapi.security import HTTPAuthorizationCredentials
from sqlalchemy.orm import Session

from ringleader.errors import RingleaderError, Unauthorized
from ringleader.server.auth import pod_project, user_for_token
from ringleader.server.deps import bearer, caller, get_session
from ringleader.server.models import User

SESSION_COOKIE = "rl_session"
LOGIN_COOKIE = "rl_login"  # the login form's double-submitted CSRF value
NOTICE_COOKIE = "rl_notice"  # one message for the next page ("Workload stopped")
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
MAX_NEXT = 512  # characters of a ?next= path kept


class LoginRequired(RingleaderError):
    """No session, or an expired or revoked one: pages redirect to the login page,
    live updates (fetch) answer 401 so their script can go there."""

    def __init__(self, next_path: str, expired: bool = False) -> None:
        super().__init__("log in to continue")
        self.next_path = next_path
        self.expired = expired


class CSRFRefused(RingleaderError):
    """A state-changing request without this session's CSRF token or from
    another site: 403, nothing done."""


def csrf_token_for(session_token: str) -> str:
    """The session's CSRF token: a digest of the token only its own pages know."""
    return hashlib.sha256(b"ringleader-csrf:" + session_token.encode()).hexdigest()


def safe_next(path: str | None) -> str:
    """Where to go after logging in: a path on this site, never another site
    (``//evil``, ``https://...``, ``/\\evil``)."""
    if not path or not path.startswith("/") or path.startswith(("//", "/\\")):
        return "/"
    parts = urlsplit(path)
    if parts.scheme or parts.netloc:
        return "/"
    return path[:MAX_NEXT]


def login_url(next_path: str, expired: bool = False) -> str:
    url = "/login?next=" + quote(safe_next(next_path), safe="/")
    return url + "&expired=1" if expired else url


def is_secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_session_cookie(response: Response, request: Request, token: str, max_age_s: int) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=max_age_s,
        path="/",
        httponly=True,
        samesite="strict",
        secure=is_secure(request),
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=is_secure(request)
    )


def set_notice(response: Response, request: Request, text: str) -> None:
    """One line the next page shows once (escaped there like any text)."""
    response.set_cookie(
        NOTICE_COOKIE,
        quote(text[:200]),
        max_age=60,
        path="/",
        httponly=True,
        samesite="strict",
        secure=is_secure(request),
    )


def _requested_path(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def session_token(request: Request) -> str | None:
    return request.cookies.get(SESSION_COOKIE) or None


def ui_user(request: Request, s: Session = Depends(get_session)) -> User:
    """The logged-in user of a UI request, else LoginRequired (a redirect)."""
    token = session_token(request)
    if token is None:
        raise LoginRequired(_requested_path(request))
    try:
        user = user_for_token(s, token)
    except Unauthorized as refused:
        raise LoginRequired(_requested_path(request), expired="expired" in str(refused)) from None
    if pod_project(s) is not None:  # a pod's token is no UI session (deps.caller's rule)
        raise LoginRequired(_requested_path(request))
    request.state.csrf_token = csrf_token_for(token)
    request.state.ui_user = user  # for an error page's nav
    return user


def bearer_or_session_user(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
    s: Session = Depends(get_session),
) -> User:
    """For read-only pages both the API and the UI link to (/docs): a bearer
    token (a pod's is refused: these are no route of ``deps.POD_ROUTES``), else the
    UI's session (a browser following the UI's link)."""
    if credentials is not None and credentials.scheme.lower() == "bearer":
        return caller(request.scope, credentials.credentials, s)
    return ui_user(request, s)


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another site."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:  # a same-site navigation from an older browser
        return True
    own = f"{request.url.scheme}://{request.url.netloc}"
    return origin == own


async def csrf_checked(request: Request, user: User = Depends(ui_user)) -> User:
    """``ui_user`` for a state-changing request: the CSRF token must match and
    the request must come from this site (else 403, nothing done)."""
    expected = request.state.csrf_token
    given = request.headers.get(CSRF_HEADER)
    if given is None and request.method == "POST":
        form = await request.form()
        value = form.get(CSRF_FIELD)
        given = value if isinstance(value, str) else None
    if not same_origin(request) or not given or not hmac.compare_digest(given, expected):
        raise CSRFRefused("refused: this form is stale or came from another site; reload the page")
    return user


def new_login_nonce() -> str:
    return secrets.token_urlsafe(24)

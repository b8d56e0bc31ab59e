"""The login page (an access key's client id and secret, the admin's first-run
key included) and logout.

Logging in issues a token through the same path as POST /api/v1/token: the
same rate limits per address and client id, the same slow check on the
key-check threads; the token becomes the session cookie.
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from sqlalchemy.orm import Session

from ringleader.errors import Unauthorized
from ringleader.server.deps import get_session
from ringleader.server.models import User
from ringleader.server.ratelimit import RateLimited
from ringleader.server.schemas import TokenRequest
from ringleader.server.services import tokens
from ringleader.server.ui.render import page
from ringleader.server.ui.session import (
    LOGIN_COOKIE,
    clear_session_cookie,
    csrf_checked,
    is_secure,
    new_login_nonce,
    safe_next,
    same_origin,
    session_token,
    set_notice,
    set_session_cookie,
)

router = APIRouter(include_in_schema=False)


def _login_page(
    request: Request,
    next_path: str,
    problem: str | None = None,
    client_id: str = "",
    status_code: int = 200,
    expired: bool = False,
) -> HTMLResponse:
    nonce = new_login_nonce()
    response = page(
        request,
        "login.html",
        None,
        status_code=status_code,
        next_path=safe_next(next_path),
        problem=problem,
        client_id=client_id,
        login_nonce=nonce,
        expired=expired,
        credentials_file=str(request.app.state.config.data_dir / "credentials.json"),
    )
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        max_age=3600,
        path="/login",
        httponly=True,
        samesite="strict",
        secure=is_secure(request),
    )
    return response


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/", expired: bool = False) -> HTMLResponse:
    return _login_page(request, next, expired=expired)


@router.post("/login", response_model=None)
async def login(
    request: Request,
    client_id: str = Form("", max_length=255),
    client_secret: str = Form("", max_length=1024),
    login_nonce: str = Form("", max_length=64),
    next: str = Form("/", max_length=1024),
) -> Response:
    state = request.app.state
    cookie = request.cookies.get(LOGIN_COOKIE, "")
    if not same_origin(request) or not cookie or not hmac.compare_digest(cookie, login_nonce):
        return _login_page(
            request,
            next,
            "This form expired or came from another site; try again.",
            client_id.strip(),
            status_code=403,
        )
    client_id = client_id.strip()
    if not client_id or not client_secret:
        field = "Client ID" if not client_id else "Client secret"
        return _login_page(request, next, f"{field} is required.", client_id, status_code=400)
    address = request.client.host if request.client else ""
    try:
        body = TokenRequest.model_validate({"clientID": client_id, "clientSecret": client_secret})
        ttl_s = state.config.ui_session_ttl_s
        issued = await tokens.issue_limited(state, body, address, ttl_s)
    except ValidationError:
        return _login_page(request, next, "Client ID or secret is malformed.", "", 400)
    except RateLimited as refused:
        wait = f"{refused.retry_after_s} s"
        return _login_page(
            request, next, f"Too many attempts; try again in {wait}.", client_id, 429
        )
    except Unauthorized:
        return _login_page(request, next, "Wrong client ID or secret.", client_id, 401)
    response = RedirectResponse(safe_next(next), status_code=303)
    set_session_cookie(response, request, issued.access_token, ttl_s)
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


@router.post("/logout", response_model=None)
def logout(
    request: Request,
    user: User = Depends(csrf_checked),
    s: Session = Depends(get_session),
) -> Response:
    token = session_token(request)
    if token:
        tokens.revoke(s, token)
    response = RedirectResponse("/login", status_code=303)
    clear_session_cookie(response, request)
    set_notice(response, request, "You are logged out.")
    return response


@router.get("/", response_model=None)
def home() -> Response:
    return RedirectResponse("/workloads", status_code=303)

"""/openapi.json, /docs and /redoc, for authenticated callers only; their
JavaScript, CSS and icon from the server itself, under /docs-assets/.

Why a token: the document maps every route and field an attacker could probe;
like every route but /healthz it needs a bearer token. The pages carry the
document inline, so a browser that was let in (with the header) needs no
second authenticated fetch; Swagger UI's "Authorize" then takes the token
for trying the API.

Why local assets: FastAPI's pages load Swagger UI and ReDoc from a CDN, which
fails on a machine without internet and tells a third party who reads the
docs. The files come from the pinned ``fastapi-offline`` package (Swagger UI 5
and ReDoc 2 bundles, MIT); they are public code, so /docs-assets/ needs no
token (a browser fetches a ``<script src>`` without the page's header). A
Content-Security-Policy keeps the pages to this origin.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

from ringleader.server.ui.session import bearer_or_session_user

# A bearer token, or the web UI's session cookie (its footer links here; GET only).
router = APIRouter(include_in_schema=False, dependencies=[Depends(bearer_or_session_user)])

ASSETS_PATH = "/docs-assets"
ASSETS_DIR = Path(str(files("fastapi_offline") / "static"))
SWAGGER_JS = f"{ASSETS_PATH}/swagger-ui-bundle.js"
SWAGGER_CSS = f"{ASSETS_PATH}/swagger-ui.css"
REDOC_JS = f"{ASSETS_PATH}/redoc.standalone.js"
FAVICON = f"{ASSETS_PATH}/favicon.png"

# An inline <script> (no src attribute) and what it holds.
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def assets() -> StaticFiles:
    """What app.py mounts at ASSETS_PATH: the package's files, no directory listing."""
    return StaticFiles(directory=ASSETS_DIR)


def _inline_json(value: Any) -> str:
    """JSON that cannot end the <script> it sits in."""
    text = json.dumps(value)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _with_policy(html: str, *, evaluates: bool = False) -> HTMLResponse:
    """The page, with a policy that lets it run only its own inline scripts (by
    hash: the document is inline) and load only from this origin. Styles may be
    inline: both libraries set them from JavaScript; ReDoc's search runs in a
    worker made from a blob: URL; Swagger UI's icons are data: images.
    ``evaluates``: the page's library compiles code at run time (ReDoc's bundle
    carries ajv, which builds validators with ``new Function``); that loads
    nothing from elsewhere, and without it the page could fail to render."""
    scripts = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in _INLINE_SCRIPT.findall(html)
    )
    if evaluates:
        scripts += " 'unsafe-eval'"
    policy = (
        "default-src 'self'; "
        f"script-src 'self' {scripts}; "
        "style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; "
        "font-src 'self' data:; "
        "worker-src 'self' blob:; "
        "connect-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
    return HTMLResponse(html, headers={"Content-Security-Policy": policy})


@router.get("/openapi.json")
def openapi(request: Request) -> dict[str, Any]:
    return request.app.openapi()


@router.get("/docs", response_class=HTMLResponse)
def swagger(request: Request) -> HTMLResponse:
    page = get_swagger_ui_html(
        openapi_url="",
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=SWAGGER_JS,
        swagger_css_url=SWAGGER_CSS,
        swagger_favicon_url=FAVICON,
        # validatorUrl: no badge that would send the document to swagger.io.
        swagger_ui_parameters={"spec": request.app.openapi(), "validatorUrl": None},
    )
    return _with_policy(bytes(page.body).decode())


@router.get("/redoc", response_class=HTMLResponse)
def redoc(request: Request) -> HTMLResponse:
    spec = _inline_json(request.app.openapi())
    return _with_policy(
        "<!DOCTYPE html><html><head><meta charset='utf-8'/>"
        f"<title>{request.app.title} - ReDoc</title>"
        f"<link rel='icon' href='{FAVICON}'/></head><body><div id='redoc'></div>"
        f"<script src='{REDOC_JS}'></script>"
        f"<script>Redoc.init({spec}, {{}}, document.getElementById('redoc'))</script>"
        "</body></html>",
        evaluates=True,
    )

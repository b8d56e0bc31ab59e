"""/openapi.json, /docs and /redoc, for authenticated callers only.

Why: the document maps every route and field an attacker could probe; like
every route but /healthz it needs a bearer token. The pages carry the
document inline, so a browser that was let in (with the header) needs no
second authenticated fetch; Swagger UI's "Authorize" then takes the token
for trying the API.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

from ringleader.server.deps import current_user

router = APIRouter(include_in_schema=False, dependencies=[Depends(current_user)])
REDOC_JS = "https://cdn.jsdelivr.net/npm/redoc@2/bundles/redoc.standalone.js"


def _inline_json(value: Any) -> str:
    """JSON that cannot end the <script> it sits in."""
    text = json.dumps(value)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@router.get("/openapi.json")
def openapi(request: Request) -> dict[str, Any]:
    return request.app.openapi()


@router.get("/docs", response_class=HTMLResponse)
def swagger(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="",
        title=f"{request.app.title} - Swagger UI",
        swagger_ui_parameters={"spec": request.app.openapi()},
    )


@router.get("/redoc", response_class=HTMLResponse)
def redoc(request: Request) -> HTMLResponse:
    spec = _inline_json(request.app.openapi())
    return HTMLResponse(
        "<!DOCTYPE html><html><head><meta charset='utf-8'/>"
        f"<title>{request.app.title} - ReDoc</title></head><body><div id='redoc'></div>"
        f"<script src='{REDOC_JS}'></script>"
        f"<script>Redoc.init({spec}, {{}}, document.getElementById('redoc'))</script>"
        "</body></html>"
    )

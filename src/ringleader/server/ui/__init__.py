"""The web UI: server-rendered pages at ``/`` on the same services and views
as the API (``services/views``), behind the same users, roles and projects.

One module per page; ``session`` holds login, cookie and CSRF; ``render`` the
templates and the headers every page carries.  No CDN and no build step: the
script and style are our own files in ``static/``.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from ringleader.server.ui import (
    admin_pages,
    auth_pages,
    nodes_page,
    projects_page,
    wizard,
    workload_page,
    workloads_page,
)
from ringleader.server.ui.render import STATIC, STATIC_PATH, page
from ringleader.server.ui.session import CSRFRefused, LoginRequired, login_url

# Order matters where paths overlap: /workloads/new before /workloads/{id}.
PAGES = [
    auth_pages.router,
    workloads_page.router,
    wizard.router,
    workload_page.router,
    projects_page.router,
    nodes_page.router,
    admin_pages.router,
]


def _wants_html(request: Request) -> bool:
    """A browser's page navigation (redirect it, show an error page) rather than a
    script's fetch or an API client (answer JSON)."""
    if request.headers.get("x-requested-with") == "fetch":
        return False
    return "text/html" in request.headers.get("accept", "")


def _login_required(request: Request, exc: LoginRequired) -> Response:
    target = login_url(exc.next_path, exc.expired)
    if _wants_html(request):
        return RedirectResponse(target, status_code=303)
    return JSONResponse({"code": 401, "message": str(exc), "login": target}, status_code=401)


def _csrf_refused(request: Request, exc: CSRFRefused) -> Response:
    if _wants_html(request):
        return page(request, "error.html", None, status_code=403, title="Refused", message=str(exc))
    return JSONResponse({"code": 403, "message": str(exc)}, status_code=403)


def install(app: FastAPI) -> None:
    """Add the UI's pages, its static files and its two redirects/refusals."""
    for router in PAGES:
        app.include_router(router)
    app.mount(STATIC_PATH, StaticFiles(directory=STATIC), name="ui-static")
    app.add_exception_handler(LoginRequired, _login_required)  # type: ignore[arg-type]
    app.add_exception_handler(CSRFRefused, _csrf_refused)  # type: ignore[arg-type]


def is_page_request(request: Request) -> bool:
    """A browser's request for a UI page (not the API, not a script's fetch)."""
    path = request.url.path
    return not path.startswith(("/api/", "/docs", "/redoc", "/healthz")) and _wants_html(request)


def error_page(request: Request, status: int, message: str) -> Response:
    """An error of a UI page as a page (the API's errors stay JSON)."""
    titles = {400: "Not valid", 403: "Not allowed", 404: "Not found", 409: "Conflict"}
    return page(
        request,
        "error.html",
        getattr(request.state, "ui_user", None),
        status_code=status,
        title=titles.get(status, "Error"),
        message=message,
    )

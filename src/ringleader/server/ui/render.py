"""Rendering the UI's pages: one Jinja2 environment, one base layout, and the
headers every page carries.

Pages are server-rendered and escaped by default (autoescape); the only
scripts are our own files under /ui-static, which the Content-Security-Policy
enforces: no inline script or style, no other origin, no framing.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from ringleader import __version__
from ringleader.server.models import User
from ringleader.server.ui.session import CSRF_FIELD, NOTICE_COOKIE

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
STATIC_PATH = "/ui-static"

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def time_tag(value: datetime | str | None, empty: str = "-", short: str = "") -> Markup:
    """A ``<time>`` the page's script shows in the browser's zone; the UTC time
    is its text (without script) and its hover title.

    ``short`` ("m", or "s" with seconds), for a table's cells: "Nov 29 09:31", one
    line, the whole time in the title; a full time wrapped a row over three lines."""
    if value is None or value == "":
        return Markup(escape(empty))
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.astimezone(timezone.utc)
    iso = moment.isoformat().replace("+00:00", "Z")
    full = moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    if not short:
        return Markup(f'<time datetime="{escape(iso)}" title="{full}">{full}</time>')
    text = moment.strftime("%b %d %H:%M:%S UTC" if short == "s" else "%b %d %H:%M UTC")
    return Markup(
        f'<time datetime="{escape(iso)}" title="{full}" data-short="{escape(short)}">{text}</time>'
    )


# A phase's colour class (status-ok, -bad ...): colour only adds to the word shown.
_STATUS_CLASSES = {
    "Running": "run",
    "Completed": "ok",
    "Succeeded": "ok",
    "Ready": "ok",
    "Failed": "bad",
    "Degraded": "bad",
    "NotReady": "bad",
    "Unknown": "bad",
    "Stopped": "idle",
    "Deleted": "idle",
}


def status_class(phase: str | None) -> str:
    """``status status-KIND`` for a phase: run, ok, bad, idle, else wait
    (Pending, Creating, Initializing, Stopping, Resuming, Deleting)."""
    return f"status status-{_STATUS_CLASSES.get(phase or '', 'wait')}"


def first_line(text: str | None) -> str:
    """A message's first line: a root cause's summary without its traceback."""
    return (text or "").strip().split("\n", 1)[0]


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(static=STATIC_PATH, ringleader_version=__version__, csrf_field=CSRF_FIELD)
    env.filters["time"] = time_tag
    env.filters["status_class"] = status_class
    env.filters["first_line"] = first_line
    return env


templates = _environment()


def with_headers(response: HTMLResponse) -> HTMLResponse:
    response.headers.update(SECURITY_HEADERS)
    return response


def page(
    request: Request,
    template: str,
    user: User | None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """A whole page: ``template`` (extending base.html) with the caller, its CSRF
    token, the nav and a one-time notice."""
    notice = request.cookies.get(NOTICE_COOKIE)
    html = templates.get_template(template).render(
        request=request,
        user=user,
        csrf_token=getattr(request.state, "csrf_token", ""),
        notice=unquote(notice)[:200] if notice else None,
        path=request.url.path,
        **context,
    )
    response = with_headers(HTMLResponse(html, status_code=status_code))
    if notice:
        response.delete_cookie(NOTICE_COOKIE, path="/")
    return response


def fragment(template: str, **context: Any) -> str:
    """A piece of a page (rows of a table ...) for a live update."""
    return templates.get_template(template).render(**context)

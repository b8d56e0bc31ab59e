"""The projects page: per project and node pool, the quota (deserved, limit,
over-quota weight), the allocation now and the fair share, as bars with the
numbers in words beside them (a bar never carries a value alone)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from ringleader.server.deps import get_session
from ringleader.server.models import User
from ringleader.server.services import ui_pages
from ringleader.server.ui.render import page
from ringleader.server.ui.session import ui_user

router = APIRouter(include_in_schema=False)


@router.get("/projects", response_class=HTMLResponse)
def projects(
    request: Request, user: User = Depends(ui_user), s: Session = Depends(get_session)
) -> HTMLResponse:
    rows = ui_pages.projects(s, user)
    return page(request, "projects.html", user, title="Projects", rows=rows)

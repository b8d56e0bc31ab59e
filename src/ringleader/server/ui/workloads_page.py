"""The workloads page (placeholder until the table lands)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from ringleader.server.models import User
from ringleader.server.ui.render import page
from ringleader.server.ui.session import ui_user

router = APIRouter(include_in_schema=False)


@router.get("/workloads", response_class=HTMLResponse)
def workloads(request: Request, user: User = Depends(ui_user)) -> HTMLResponse:
    return page(request, "workloads.html", user, title="Workloads")

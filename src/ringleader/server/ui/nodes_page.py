"""The nodes page: per node its kind, pool, readiness (with the reason in
words), resources, and the allocation of each GPU, fractions included, with
the holders named only where the caller may see their project."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from ringleader.sched.text import decimal_size as size
from ringleader.sched.text import number
from ringleader.server import node_kinds
from ringleader.server.deps import get_session
from ringleader.server.models import User
from ringleader.server.services import ui_pages
from ringleader.server.ui.render import page
from ringleader.server.ui.session import ui_user

router = APIRouter(include_in_schema=False)

KINDS = node_kinds.LABELS


@router.get("/nodes", response_class=HTMLResponse)
def nodes(
    request: Request, user: User = Depends(ui_user), s: Session = Depends(get_session)
) -> HTMLResponse:
    rows = ui_pages.nodes(s, user)
    return page(
        request, "nodes.html", user, title="Nodes", rows=rows, kinds=KINDS, number=number, size=size
    )

"""The workloads page: Run:ai's table of workloads, filtered, searched, sorted and
paged by GET parameters (a shareable URL that works without JavaScript), with a
live refresh and the actions Stop, Run, Delete, Copy & edit and Connect.

Reads go through ``services.ui_workloads`` (the API's list logic and views);
actions call the same services as the API's suspend/resume/delete routes and
come back here with a one-time notice.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.orm import Session

from ringleader.errors import InvalidSpec
from ringleader.server.deps import get_session
from ringleader.server.models import User
from ringleader.server.routers.clusters import this_cluster_id
from ringleader.server.services import ui_workloads as uw
from ringleader.server.ui import workload_actions
from ringleader.server.ui.render import SECURITY_HEADERS, fragment, page
from ringleader.server.ui.session import ui_user

router = APIRouter(include_in_schema=False)
router.include_router(workload_actions.router)  # Stop, Run, Delete: shared with the workload page


def _context(result: uw.Page) -> dict[str, object]:
    return {
        "result": result,
        "q": result.query,
        "statuses": uw.STATUSES,
        "sizes": uw.PAGE_SIZES,
        "columns": uw.COLUMNS,
        "sort_labels": uw.SORT_LABELS,
        "back": result.query.url(),
    }


def _refused_page(problem: InvalidSpec, projects: list[str]) -> uw.Page:
    """An empty page that says which parameter was wrong (the controls stay usable)."""
    return uw.Page(
        query=uw.PageQuery(),
        rows=[],
        total=0,
        projects=projects,
        version="",
        problem=problem.problem,
        problem_field=problem.where,
    )


@router.get("/workloads", response_class=HTMLResponse)
def workloads(
    request: Request,
    user: User = Depends(ui_user),
    s: Session = Depends(get_session),
    cluster_id: str = Depends(this_cluster_id),
) -> HTMLResponse:
    try:
        query = uw.PageQuery.parse(request.query_params)
        result = uw.workloads_page(s, user, query, cluster_id=cluster_id)
        status = 200
    except InvalidSpec as bad:
        result = _refused_page(bad, sorted(uw.visible_project_names(s, user)))
        status = 400
    return page(
        request,
        "workloads.html",
        user,
        status_code=status,
        title="Workloads",
        **_context(result),
    )


@router.get("/workloads/live")
def live(
    request: Request,
    version: str = Query("", max_length=64),
    have: str = Query("", max_length=4096),
    user: User = Depends(ui_user),
    s: Session = Depends(get_session),
    cluster_id: str = Depends(this_cluster_id),
) -> Response:
    """What changed since the browser's page: ``{"v": ...}`` alone when nothing did (a
    few bytes); else the page's rows in order (``order``: each row's version) with the
    HTML of only the rows the browser does not have (``have``: its rows' versions)."""
    try:
        query = uw.PageQuery.parse(request.query_params)
        rows, total, _ = uw.page_rows(s, user, query)
    except InvalidSpec as bad:
        return JSONResponse({"code": 400, "message": str(bad)}, status_code=400)
    order = [uw.row_version(r) for r in rows]
    current = uw.version(total, order)
    if current == version:
        return JSONResponse({"v": current}, headers=SECURITY_HEADERS)
    held = set(have.split("."))
    fresh = [r for r, v in zip(rows, order, strict=True) if v not in held]
    context = {
        "back": query.url(),
        "csrf_token": getattr(request.state, "csrf_token", ""),
        "columns": uw.COLUMNS,
    }
    html = {
        row.version: fragment("workloads_row.html", row=row, **context)
        for row in uw.to_rows(s, fresh, cluster_id=cluster_id)
    }
    text = uw.range_text(query.offset, len(rows), total)
    body = {"v": current, "order": order, "rows": html, "range": text, "total": total}
    return JSONResponse(body, headers=SECURITY_HEADERS)

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
from ringleader.server.services import ui_live
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
        totals = _live_cache(request).total_of(s, user)  # shared with other renders
        result = uw.workloads_page(s, user, query, cluster_id=cluster_id, total_of=totals)
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
    HTML of only the rows the browser does not have (``have``: its rows' versions).
    What the page holds is read once a second for all who see it (``LiveCache``)."""
    cache = _live_cache(request)
    try:
        query = uw.PageQuery.parse(request.query_params)
        state = cache.state(s, user, query)
    except InvalidSpec as bad:
        return JSONResponse({"code": 400, "message": str(bad)}, status_code=400)
    if state.version == version:
        return JSONResponse({"v": state.version}, headers=SECURITY_HEADERS)
    held = set(have.split("."))
    back = query.url()
    html = _rows_html(cache, s, state, held, back, cluster_id)
    if html is None:  # a row changed since the page's state was read: read it again
        state = cache.fresh(s, user, query)
        html = _rows_html(cache, s, state, held, back, cluster_id) or {}
    csrf = getattr(request.state, "csrf_token", "")
    text = uw.range_text(query.offset, len(state.ids), state.total)
    body = {
        "v": state.version,
        "order": list(state.order),
        "rows": {v: row.replace(ui_live.CSRF_MARK, csrf) for v, row in html.items()},
        "range": text,
        "total": state.total,
    }
    return JSONResponse(body, headers=SECURITY_HEADERS)


def _rows_html(
    cache: ui_live.LiveCache,
    s: Session,
    state: ui_live.LiveState,
    held: set[str],
    back: str,
    cluster_id: str,
) -> dict[str, str] | None:
    """The HTML of the page's rows the browser lacks, by version (with ``CSRF_MARK`` for
    the session's token); a row built once serves every viewer. None when a row read
    now no longer has the version the state says (it changed meanwhile)."""
    lacking = [(i, v) for i, v in zip(state.ids, state.order, strict=True) if v not in held]
    out = {v: html for _, v in lacking if (html := cache.row_html(v, back)) is not None}
    build = [i for i, v in lacking if v not in out]
    rows = uw.to_rows(s, ui_live.load_rows(s, build), cluster_id=cluster_id)
    context = {"back": back, "csrf_token": ui_live.CSRF_MARK, "columns": uw.COLUMNS}
    for row in rows:
        if row.version not in state.order:
            return None
        out[row.version] = cache.keep_row_html(
            row.version, back, fragment("workloads_row.html", row=row, **context)
        )
    return out


def _live_cache(request: Request) -> ui_live.LiveCache:
    """The app's LiveCache, made at start-up with its database's change count (app.py)."""
    cache: ui_live.LiveCache = request.app.state.live_pages
    return cache

"""The actions Stop, Run and Delete, for the workloads table and a workload's page:
the same services as the API's suspend/resume/delete routes, then back where the
user was (the table with its query, or the workload's page) with a one-time notice.

Delete asks first: the page's script (``data-confirm``) sets ``confirmed``; without
script a confirmation page asks instead.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session

from ringleader.errors import Conflict, InvalidSpec, NotFound
from ringleader.server.deps import get_session
from ringleader.server.models import User
from ringleader.server.services import workload_intents as intents
from ringleader.server.services import workloads as svc
from ringleader.server.ui.render import page
from ringleader.server.ui.session import csrf_checked, safe_next, set_notice

router = APIRouter(include_in_schema=False)


def _back(back: str, workload_id: str, action: str) -> str:
    """Where an action returns: the table as it was (its query kept) or this
    workload's page (the table once it is deleted), never elsewhere."""
    target = safe_next(back)
    if target == f"/workloads/{workload_id}":
        return "/workloads" if action == "delete" else target
    return target if target == "/workloads" or target.startswith("/workloads?") else "/workloads"


def _act(request: Request, s: Session, user: User, workload_id: str, action: str, back: str):
    """Record a suspend/resume/delete through the API's services; back to the table
    with what happened (a refusal in words: already stopped, not suspendable ...)."""
    intent = {"stop": "suspend", "run": "resume", "delete": "delete"}[action]  # the UI's words
    change = intents.intent(intent, request.app.state.backends)
    done = {"stop": "Stopping", "run": "Resuming", "delete": "Deleting"}[action]
    try:
        accepted = svc.record_intent(s, user, workload_id, change)
    except NotFound:
        # A page left open after the workload went (or one the user cannot see:
        # the same answer, so nothing is learnt about other projects).
        s.rollback()
        return page(
            request,
            "error.html",
            user,
            status_code=404,
            title="Workload not found",
            message="This workload no longer exists (it may have been deleted in another"
            " tab), or it is in a project you cannot see. Nothing was done.",
        )
    except (Conflict, InvalidSpec) as refused:
        s.rollback()
        text = f"Could not {action} the workload: {refused}"
    else:
        request.app.state.background.intent_recorded()
        text = f"{done} {accepted.name}."
    response = RedirectResponse(_back(back, workload_id, action), status_code=303)
    set_notice(response, request, text)
    return response


@router.post("/workloads/{workload_id}/suspend", response_model=None)
def suspend(
    workload_id: str,
    request: Request,
    back: str = Form("/workloads", max_length=2048),
    user: User = Depends(csrf_checked),
    s: Session = Depends(get_session),
) -> Response:
    return _act(request, s, user, workload_id, "stop", back)


@router.post("/workloads/{workload_id}/resume", response_model=None)
def resume(
    workload_id: str,
    request: Request,
    back: str = Form("/workloads", max_length=2048),
    user: User = Depends(csrf_checked),
    s: Session = Depends(get_session),
) -> Response:
    return _act(request, s, user, workload_id, "run", back)


@router.post("/workloads/{workload_id}/delete", response_model=None)
def delete(
    workload_id: str,
    request: Request,
    back: str = Form("/workloads", max_length=2048),
    confirmed: str = Form("", max_length=8),
    user: User = Depends(csrf_checked),
    s: Session = Depends(get_session),
) -> Response:
    """Without ``confirmed`` (no script asked first) a page asks; with it, delete."""
    if confirmed != "yes":
        workload = svc.get(s, user, workload_id)  # 404 for one the user cannot see
        return page(
            request,
            "workloads_delete.html",
            user,
            title=f"Delete {workload.name}?",
            workload=workload,
            back=_back(back, workload_id, "stop"),
        )
    return _act(request, s, user, workload_id, "delete", back)

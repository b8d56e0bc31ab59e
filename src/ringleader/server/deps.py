"""Request-scoped dependencies: the DB session and the caller.

A pod token (``auth.issue_pod_token``) reaches only ``POD_ROUTES``: its own
project's workloads (the role checks confine it to that project, see
``auth.pod_project``), who it is, its own logout and the read-only views a
client needs to name that project and cluster.  Every other route, and any
route added later, is a 403 for it: a stolen pod token cannot mint access keys
or tokens, make users or change memberships, so it dies with its workload.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from ringleader.errors import Forbidden, Unauthorized
from ringleader.server.auth import pod_project, user_for_token
from ringleader.server.models import User

bearer = HTTPBearer(auto_error=False, description="Bearer token from POST /api/v1/token")


READ_METHODS = frozenset({"GET", "HEAD"})
# Where a pod token may go besides its project's workloads (WORKLOAD_ROUTES): the
# method and the route's path template, so a route added later is closed to pods.
POD_ROUTES: frozenset[tuple[str, str]] = frozenset(
    {
        ("GET", "/api/v1/me"),
        ("DELETE", "/api/v1/token"),  # its own logout
        ("GET", "/api/v1/clusters"),
        ("GET", "/api/v1/clusters/{cluster_uuid}"),
        ("GET", "/api/v1/org-unit/projects"),  # its own project only (visible_projects)
        ("GET", "/api/v1/org-unit/projects/{key}"),
    }
)
WORKLOAD_ROUTES = "/api/v1/workloads"


# POSTs that only read (a form sent to be shown back, too big for a URL): a reader session,
# so they never wait for or hold the write lock.
READ_ONLY_POSTS = frozenset({"/workloads/new/summary"})


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; the route commits what it changed.

    GET and HEAD (and ``READ_ONLY_POSTS``) get a reader session, so they never wait
    for (or hold) the write lock; every other request gets a writer session.
    """
    state = request.app.state
    reads = request.method in READ_METHODS or request.url.path in READ_ONLY_POSTS
    sessions = state.readers if reads else state.sessions
    with sessions() as session:
        yield session


MISSING_TOKEN = "missing bearer token; get one with `ringleader token` or POST /api/v1/token"


def bearer_token(
    credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
) -> str:
    """The bearer token of the ``Authorization`` header, unchecked; 401 when none."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized(MISSING_TOKEN)
    return credentials.credentials


def pod_may_reach(method: str, route_path: str) -> bool:
    """Whether a pod token may call this route (``route_path``: its template)."""
    method = "GET" if method == "HEAD" else method
    if route_path == WORKLOAD_ROUTES or route_path.startswith(WORKLOAD_ROUTES + "/"):
        return True
    return (method, route_path) in POD_ROUTES


def current_user(
    request: Request,
    token: str = Depends(bearer_token),
    session: Session = Depends(get_session),
) -> User:
    """The caller: the user of a valid, unexpired, unrevoked token (else 401); a pod
    token only on ``pod_may_reach``'s routes (else 403)."""
    return caller(request.scope, token, session)


def caller(scope: Mapping[str, Any], token: str, session: Session) -> User:
    """``current_user`` for a request's ``scope``; also what a body's check off the
    loop asks first (``validation``), so a caller who may not call a route hears
    401 or 403, never what its body got wrong."""
    user = user_for_token(session, token)
    if pod_project(session) is not None:
        method, path = scope.get("method", "GET"), scope.get("path", "")
        path = getattr(scope.get("route"), "path", path)
        if not pod_may_reach(method, path):
            raise Forbidden(
                "a pod's token acts only on its own project's workloads; "
                f"{method} {path} needs the user's own access key"
            )
    return user

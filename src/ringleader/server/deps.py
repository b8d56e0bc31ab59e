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
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from ringleader.errors import Forbidden, Unauthorized
from ringleader.server.auth import (
    CACHE,
    EXPIRED,
    POD_PROJECT,
    detached_copy,
    pod_project,
    token_digest,
    user_for_token,
)
from ringleader.server.db import utcnow
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


async def bearer_token(
    credentials: HTTPAuthorizationCredentials | None = Depends(bearer),
) -> str:
    """The bearer token of the ``Authorization`` header, unchecked; 401 when none.
    (On the event loop: it reads a header, and a worker thread costs more.)"""
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


@dataclass(frozen=True)
class Verified:
    """A caller checked before its route runs: a detached copy of its user (no
    session's), and the project its pod token confines it to (None: a user's token)."""

    user: User
    pod_project: str | None = None

    def attach(self, session: Session) -> User:
        """The user in ``session`` (no query), confined as the token is (and only as
        it is: a group commit's session serves several callers in turn)."""
        if self.pod_project is None:
            session.info.pop(POD_PROJECT, None)
        else:
            session.info[POD_PROJECT] = self.pod_project
        return session.merge(self.user, load=False)


async def verified_caller(request: Request, token: str = Depends(bearer_token)) -> Verified:
    """``current_user`` for routes that do their work in one worker thread of their own
    (the submission's group commit, GET /api/v1/me): a token the cache verified a
    moment ago (``token_cache``) is answered on the event loop, with no thread and no
    session; any other is checked on a reader session in a worker thread."""
    entry = CACHE.get(token_digest(token))
    if entry is not None:  # a user's token (pod tokens are never cached): every route
        if entry.expires_at <= utcnow():
            raise Unauthorized(EXPIRED)
        return Verified(entry.user)
    return await anyio.to_thread.run_sync(_verify, request, token)


def _verify(request: Request, token: str) -> Verified:
    with request.app.state.readers() as session:
        user = caller(request.scope, token, session)
        return Verified(detached_copy(user), pod_project(session))

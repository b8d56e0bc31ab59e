"""The FastAPI application: wiring, error mapping, start-up.

Errors are typed (``ringleader.errors``) and mapped to HTTP here, once.
Start-up applies migrations, creates the admin and default project on the
first run, and starts the background loops; shutting the server down leaves
running workloads alone (their supervisors are detached) so a restart
re-adopts them.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError

from ringleader import __version__
from ringleader.errors import InvalidSpec, RingleaderError
from ringleader.launch.ssh import SSHOptions
from ringleader.server import admission, auth, limits, registry, ui
from ringleader.server.acting import Acting
from ringleader.server.admission import Admission
from ringleader.server.backends import BackendContext, BackendSet
from ringleader.server.backends.base import Backend, ImagePolicy
from ringleader.server.backends.ssh import NodeBook
from ringleader.server.config import ServerConfig
from ringleader.server.db import Database, open_database
from ringleader.server.ha import fence, gate, lease
from ringleader.server.ha import setup as ha_setup
from ringleader.server.ha.elector import ACTIVE, Elector
from ringleader.server.http_status import status_of
from ringleader.server.limits import BodyLimit, JsonBounds
from ringleader.server.migrate import upgrade
from ringleader.server.ratelimit import KeyChecks, RateLimited, TokenLimits
from ringleader.server.routers import assets as asset_routes
from ringleader.server.routers import auth as auth_routes
from ringleader.server.routers import clusters as cluster_routes
from ringleader.server.routers import docs, nodes, projects, users, workloads
from ringleader.server.routers import exec as exec_routes
from ringleader.server.services import clusters, reader_process
from ringleader.server.services.logs import FollowSlots
from ringleader.server.services.ui_live import LiveCache
from ringleader.server.services.workload_changes import WorkloadChanges
from ringleader.server.ssh_nodes import probe_node
from ringleader.server.ui.session import SESSION_COOKIE
from ringleader.server.validation import body_checked_off_loop, validation_error


def _error_response(request: Request, exc: RingleaderError) -> JSONResponse:
    status = status_of(exc)
    body: dict[str, object] = {"code": status, "message": str(exc)}
    if isinstance(exc, InvalidSpec):
        # The shape of FastAPI's own 422 (HTTPValidationError), which the OpenAPI
        # document declares for every route: loc, msg and type are all required.
        loc = exc.where.split(".") if exc.where else []
        body["detail"] = [{"loc": loc, "msg": exc.problem, "type": "value_error"}]
    if ui.is_page_request(request):
        return ui.error_page(request, status, str(exc))  # a page's error is a page
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if isinstance(exc, RateLimited):
        headers["Retry-After"] = str(exc.retry_after_s)
    return JSONResponse(body, status_code=status, headers=headers or None)


def _not_active(request: Request, exc: fence.NotActive) -> JSONResponse:
    """A write that reached a server which is not (or no longer) the active one:
    nothing was stored; the client retries, there or at the active (``ha.gate``)."""
    body, headers = gate.refusal(exc)
    return JSONResponse(body, status_code=503, headers=headers)


def _integrity_error(request: Request, exc: IntegrityError) -> JSONResponse:
    """A write that lost a race to a concurrent one (e.g. two workloads given the
    same name at the same moment on PostgreSQL): nothing was stored."""
    return JSONResponse(
        {"code": 409, "message": "conflicts with a record written at the same time; retry"},
        status_code=409,
    )


class _JSON(JSONResponse):
    """FastAPI's JSON response, except that text no UTF-8 encoder writes (a lone
    surrogate in a row stored before input was checked for them) is sent as JSON's
    ``\\udXXX`` escape instead of failing the response (500)."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False).encode()


def create_app(config: ServerConfig | None = None, backend: Backend | None = None) -> FastAPI:
    """The app; ``backend``: one backend object for every pool (tests inject fakes),
    instead of the configured ``config.backends``."""
    config = config or ServerConfig()
    book = NodeBook()  # filled from the nodes table once the database is open
    # The documents are served by routers/docs.py, to authenticated callers only;
    # their scripts and styles (public code, no token) from /docs-assets/, no CDN.
    app = FastAPI(
        title="ringleader",
        version=__version__,
        lifespan=_lifespan(config, book),
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        default_response_class=_JSON,
        # Every route's body is checked on a worker thread before FastAPI validates it.
        dependencies=[Depends(body_checked_off_loop)],
    )
    _state(app, config, backend, book)
    _handlers_and_limits(app, config)
    _routes(app)
    return app


# A full (generation 2) collection walks every object the server holds that start-up
# did not freeze: ~250 ms with 1,000 log follows and 200 UI clients open, every ~2 s
# under load at CPython's default (10 younger collections each), and every /healthz
# caught behind one waited it out (p99 250 ms). After 100 it runs ~10x less often
# (the p99 ~60 ms); cycles of garbage wait that much longer to be freed (issue 27).
FULL_COLLECTION_EVERY = 100


def _lifespan(
    config: ServerConfig, book: NodeBook
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The server's life: the database, its rows and loops from start-up to shutdown."""
    url = config.resolved_database_url()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        config.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        anyio.to_thread.current_default_thread_limiter().total_tokens = admission.THREADS
        app.state.cluster = clusters.load_or_create(config.data_dir)  # its UUID is stable
        electing = ha_setup.check(config.ha, url)
        upgrade(url)
        holder = ha_setup.server_id(config.data_dir) if electing else ""
        database = open_database(url, lease.connect_args(holder) if electing else None)
        app.state.sessions, app.state.readers = database.writer, database.reader
        # The UI's pages and totals, shared between viewers until a workload changes.
        app.state.workload_changes = WorkloadChanges.watching(database.writer)
        app.state.live_pages = LiveCache(app.state.workload_changes)
        app.state.key_checks = KeyChecks(warm=auth.dummy_hash)  # the token endpoint's threads
        acting = Acting(app, config, database, book)
        elector = _elector(config, url, holder, database, acting) if electing else None
        app.state.ha = elector
        if elector is None:
            acting.start()
        else:
            elector.settle(timeout_s=max(10.0, 3 * config.lease_ttl_s))
            elector.start()
        # Everything made so far (the app, its routes, SQLAlchemy's mappers) lives as
        # long as the server: out of the collector's sight, a full collection no longer
        # walks it, which made every ~75th request wait ~90 ms.
        gc.collect()
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(thresholds[0], thresholds[1], FULL_COLLECTION_EVERY)
        try:
            yield
        finally:
            gc.set_threshold(*thresholds)
            app.state.stopping.set()
            if elector is not None:
                elector.stop()  # steps down (loops stopped), hands the lease back
            acting.stop()
            app.state.key_checks.shutdown()
            reader_process.READER.close()  # the metrics reader ends with the server
            limits.CHECKER.close()  # and so does the body checker
            database.dispose()

    return lifespan


def _elector(
    config: ServerConfig, url: str, holder: str, database: Database, acting: Acting
) -> Elector:
    """This server's part in the election: fenced writes, a lease of its own."""
    current = fence.Fence()
    for engine in database.engines:
        fence.install(engine, current)
    advertised = config.advertise_url or config.url
    store = lease.LeaseStore(url, holder, advertised, config.lease_ttl_s)
    return Elector(
        store,
        current,
        renew_s=config.lease_renew_s,
        ttl_s=config.lease_ttl_s,
        on_active=acting.start,
        on_standby=acting.stop,
    )


def _state(app: FastAPI, config: ServerConfig, backend: Backend | None, book: NodeBook) -> None:
    """What routes find on ``app.state`` before the lifespan opens the database."""
    app.state.config = config
    app.state.ha = None  # the lifespan's Elector when this server takes part in one
    app.state.token_limits = TokenLimits()  # POST /api/v1/token's bounds (ratelimit.py)
    app.state.follows = FollowSlots(config.max_follows_per_user)  # open logs?follow per user
    # Set when the server shuts down: open streams (logs?follow) end on it.
    app.state.stopping = threading.Event()
    registry_dir = str(registry.directory(config.data_dir.resolve()))  # what agents read
    images = ImagePolicy(config.host_paths, config.image_pull_timeout_s, registry_dir)
    context = BackendContext(python=config.workload_python, node_book=book, images=images)
    if backend is None:
        app.state.backends = BackendSet(config.backends, context)
    else:
        app.state.backends = BackendSet.only(backend)
    # The default pool's backend: what routes use until they ask per workload.
    app.state.backend = app.state.backends.default
    app.state.ssh = SSHOptions.from_env(config.ssh_config)
    # What SSH nodes are probed with: the interpreter the backends start agents with.
    app.state.node_python = getattr(app.state.backend, "python", sys.executable)
    app.state.probe_node = probe_node  # replaceable in tests that must not open SSH


def _handlers_and_limits(app: FastAPI, config: ServerConfig) -> None:
    """Errors to HTTP once, and the bounds every request meets before a route."""
    app.add_exception_handler(RingleaderError, _error_response)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(IntegrityError, _integrity_error)  # type: ignore[arg-type]
    app.add_exception_handler(fence.NotActive, _not_active)  # type: ignore[arg-type]
    app.add_middleware(JsonBounds)  # inside BodyLimit: sees whole bodies within the bound
    app.add_middleware(
        BodyLimit,
        max_bytes=config.max_body_bytes,
        timeout_s=config.body_timeout_s,
        session_cookie=SESSION_COOKIE,
    )
    # Outermost: a request waits here, holding nothing, before anything reads it.
    app.add_middleware(
        Admission,
        follows=config.max_follows_per_user,
        session_cookie=f"{SESSION_COOKIE}=".encode(),
    )
    # Outside even that: a standby refuses a write before it queues or reads a byte.
    app.add_middleware(
        gate.StandbyGate,
        active=lambda: _role(app) != "standby",
        active_url=lambda: getattr(app.state.ha, "active_url", None),
    )


def _role(app: FastAPI) -> str:
    """``single`` (no election), ``active`` or ``standby`` (``server/ha``)."""
    elector: Elector | None = getattr(app.state, "ha", None)
    if elector is None:
        return "single"
    return "active" if elector.role == ACTIVE and elector.fence.epoch() is not None else "standby"


def _routes(app: FastAPI) -> None:
    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:  # on the loop: no worker thread to wait for
        """``role``: ``single``, ``active`` or ``standby`` (a standby takes no writes);
        ``active``: where the active answers, when this server knows."""
        body = {"status": "ok", "version": __version__, "role": _role(app)}
        if (active := getattr(app.state.ha, "active_url", None)) is not None:
            body["active"] = active
        return body

    app.include_router(auth_routes.router)
    app.include_router(projects.router)
    app.include_router(cluster_routes.router)
    app.include_router(workloads.router)
    app.include_router(exec_routes.router)
    app.include_router(nodes.router)
    app.include_router(users.router)
    app.include_router(asset_routes.router)
    app.include_router(docs.router)
    app.mount(docs.ASSETS_PATH, docs.assets(), name="docs-assets")
    ui.install(app)  # the web UI at /: pages, its static files, login redirects

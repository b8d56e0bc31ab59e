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
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ringleader import __version__
from ringleader.errors import InvalidSpec, RingleaderError
from ringleader.launch.ssh import SSHOptions
from ringleader.server import admission, auth, inventory, limits, node_kinds, registry, ui
from ringleader.server.accounts import accounts_for
from ringleader.server.admission import Admission
from ringleader.server.backends import BackendContext, BackendSet
from ringleader.server.backends.base import Backend, ImagePolicy
from ringleader.server.backends.ssh import NodeBook, SSHNode
from ringleader.server.background import Background, World
from ringleader.server.background.heartbeats import NodeMonitor
from ringleader.server.config import ServerConfig
from ringleader.server.db import Database, open_database
from ringleader.server.engine_pools import EngineNodes
from ringleader.server.http_status import status_of
from ringleader.server.limits import BodyLimit, JsonBounds
from ringleader.server.migrate import upgrade
from ringleader.server.models import Node
from ringleader.server.ratelimit import KeyChecks, RateLimited, TokenLimits
from ringleader.server.routers import assets as asset_routes
from ringleader.server.routers import auth as auth_routes
from ringleader.server.routers import clusters as cluster_routes
from ringleader.server.routers import docs, nodes, projects, users, workloads
from ringleader.server.routers import exec as exec_routes
from ringleader.server.services import clusters, reader_process
from ringleader.server.services.logs import FollowSlots
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


def ssh_nodes(database: Database) -> Callable[[], dict[str, SSHNode]]:
    """What fills the SSH backend's book of login targets: the nodes table."""

    def load() -> dict[str, SSHNode]:
        with database.reader() as s:
            rows = s.execute(
                select(Node.name, Node.ssh, Node.address).where(Node.kind == node_kinds.SSH)
            ).all()
        return {name: SSHNode(ssh or name, address or name) for name, ssh, address in rows}

    return load


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
        upgrade(url)
        database = open_database(url)
        app.state.sessions, app.state.readers = database.writer, database.reader
        app.state.key_checks = KeyChecks(warm=auth.dummy_hash)  # the token endpoint's threads
        with app.state.sessions() as session, session.begin():
            _first_rows(session, config, app.state.backend)
        book.load_with(ssh_nodes(database))
        world = World(
            database,
            app.state.backends,
            config.runs_dir,
            config.placement,
            server_url=config.url,
            pod_token_ttl_s=config.pod_token_ttl_s,
            accounts=accounts_for(config),
        )
        background = app.state.background = Background(world, interval_s=config.loop_interval_s)
        engine_nodes = EngineNodes(database, app.state.backends.all, background.wake)
        engine_nodes.refresh()  # a Slurm partition's nodes are there before the first cycle
        monitor = NodeMonitor(database, app.state.node_python, app.state.ssh, background.wake)

        def nodes_changed() -> None:
            book.refresh()
            monitor.refresh()
            background.wake()

        app.state.nodes_changed = nodes_changed
        if config.background:
            background.start()
            monitor.start()
            engine_nodes.start()
        # Everything made so far (the app, its routes, SQLAlchemy's mappers) lives as
        # long as the server: out of the collector's sight, a full collection no longer
        # walks it, which made every ~75th request wait ~90 ms.
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            app.state.stopping.set()
            engine_nodes.stop()
            monitor.stop()
            background.stop()
            app.state.key_checks.shutdown()
            reader_process.READER.close()  # the metrics reader ends with the server
            limits.CHECKER.close()  # and so does the body checker
            database.dispose()

    return lifespan


def _first_rows(session: Session, config: ServerConfig, backend: Backend) -> None:
    """The admin and its credentials file on a fresh home; the declared nodes."""
    auth.bootstrap(
        session, config.data_dir / "credentials.json", f"http://{config.host}:{config.port}"
    )
    declared = config.nodes
    if declared is None:
        here = inventory.local_node(getattr(backend, "node", "localhost"))
        # A default backend with nodes of its own (Slurm's) makes this a head node.
        own = backend.capabilities.engine_nodes
        declared = [here] if config.local_node and not own else []
    inventory.sync_nodes(session, declared)


def _state(app: FastAPI, config: ServerConfig, backend: Backend | None, book: NodeBook) -> None:
    """What routes find on ``app.state`` before the lifespan opens the database."""
    app.state.config = config
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


def _routes(app: FastAPI) -> None:
    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:  # on the loop: no worker thread to wait for
        return {"status": "ok", "version": __version__}

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

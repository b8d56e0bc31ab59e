"""Fuzz the HTTP API against its own OpenAPI document (/openapi.json) with schemathesis.

Every operation the document lists is called with generated requests, valid and
invalid (schemathesis' positive and negative modes, plus its coverage phase of
boundary values), carrying the admin's bearer token (negative cases may mangle
it), on one in-process app per database (SQLite and PostgreSQL) whose state
carries from operation to operation.
Each response must pass:

- ``not_a_server_error``: no 5xx (nor an exception out of the app), whatever the input;
- ``response_schema_conformance``: a documented status code's body matches the
  schema the document gives for it (our own 422s included);
- ``content_type_conformance``: and has the documented media type.

Status codes the document does not list (401, 404, 409) are not checked here;
``test_api.py`` pins them.

Invariants:
- The app runs in-process (ASGI) with ``NullBackend``, which starts nothing:
  workloads the fuzzer submits are admitted and reported Running, but no
  process is ever spawned. The subject here is the HTTP layer; the real local
  backend is exercised by ``test_api.py``.
- Bounded and reproducible: at most ``MAX_EXAMPLES`` generated cases per
  operation (plus the coverage phase's), derandomized (a fixed seed per
  operation), no example database; secrets hashed with few rounds (the cost of
  PBKDF2 is not what is fuzzed: see ``served``).
- Random values rarely hit what servers trip on, so dictionaries mix in edge
  values (NUL, integers past 64 bits, filter expressions, edge times), and
  generated ids almost never name anything, so about half the cases (one more
  derandomized draw) aim at a workload and a project that exist.
- ``GET .../logs?follow=true`` streams until the workload ends, and a
  NullBackend workload never ends: the fuzzer's ``follow`` is dropped (the
  streaming path is covered by ``test_api.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from ringleader.errors import Conflict, HostUnreachable
from ringleader.server import auth
from ringleader.server.app import create_app
from ringleader.server.backends.base import (
    Backend,
    BackendRequest,
    BackendStatus,
    Capabilities,
    LogLine,
)
from ringleader.server.config import ServerConfig
from tests.conftest import wait_until
from tests.fixtures.postgres import migrated_database
from tests.server.conftest import API

MAX_EXAMPLES = 20


def probe_answer(target: str, python: str, ssh: object) -> dict[str, Any]:
    """POST /api/v1/nodes without SSH: an unreachable host, or a small node."""
    if target.startswith("0"):
        raise HostUnreachable(target, "connect", "connection refused", "is sshd running?")
    return {"cpu_cores": 4, "memory_bytes": 2**33, "gpus": [], "ringleader": "0.1.0"}


class NullBackend(Backend[BackendRequest]):
    """A backend that runs nothing: start hands back a handle, poll says Running."""

    name = "null"
    capabilities = Capabilities(multi_node=True, exec=True)

    def plan(self, request: BackendRequest) -> BackendRequest:
        return request

    def submit(self, plan: BackendRequest) -> str:
        return f"null-{plan.workload_id}"

    def poll(self, handle: str) -> BackendStatus:
        return BackendStatus(phase="Running")

    def is_live(self, handle: str) -> bool:
        return False

    def stop(self, handle: str) -> None:
        pass

    def logs(
        self, handle: str, pod: str | None = None, tail: int | None = None
    ) -> Iterator[LogLine]:
        yield LogLine(pod=pod or "null-master-0", attempt=0, stream="stdout", text="hello", time=0)

    def exec_target(self, handle: str, pod: str) -> Any:
        raise Conflict("the null backend runs nothing")


def _openapi() -> dict[str, Any]:
    """The document the server serves to an authenticated caller (built without a
    lifespan or a token: nothing is started or written)."""
    app = create_app(ServerConfig(data_dir=Path("/nonexistent")), backend=NullBackend())
    return app.openapi()


# Values random generation rarely hits but servers often trip on, mixed into the
# generated strings and integers: NUL (PostgreSQL text cannot hold it), huge
# integers (past SQLite's and PostgreSQL's 64 bits, past a float), filter
# expressions on each kind of column, durations and times at the edges.
EDGE_STRINGS = [
    "a\x00b",
    "",
    "default",
    "name==a\x00b",
    "name=@%",
    "createdAt<=not-a-time",
    "createdAt>=2024-01-01T00:00:00Z",
    "createdAt=@2024",
    "phase!=Running,name=@seed",
    "9" * 400 + "d",
    "9" * 400 + "Mi",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "master-0",
    "worker-0",
    "1.5Gi",
]
EDGE_INTEGERS = [0, -1, 2**31, 2**63, 2**64, 10**30, -(2**63) - 1]

CONFIG = schemathesis.Config.from_dict(
    {
        "suppress-health-check": ["too_slow", "filter_too_much", "data_too_large"],
        "dictionaries": {
            "edge-strings": {"values": EDGE_STRINGS},
            "edge-integers": {"values": EDGE_INTEGERS},
            "sort-fields": {"values": ["createdAt", "name", "createdBy", "phase"]},
            "sort-orders": {"values": ["asc", "desc"]},
            "pods": {"values": ["master-0", "worker-0", "seed-worker-0", "launcher"]},
        },
        # Valid sorting half the time, so that offsets and filters reach the database.
        "parameters": {
            "query.sortBy": {"dictionary": "sort-fields", "probability": 0.5},
            "query.sortOrder": {"dictionary": "sort-orders", "probability": 0.5},
            "query.offset": {"dictionary": "edge-integers", "probability": 0.3},
            "query.filterBy": {"dictionary": "edge-strings", "probability": 0.5},
            "query.since": {"dictionary": "edge-strings", "probability": 0.5},
            "query.pod": {"dictionary": "pods", "probability": 0.5},
        },
        "generation": {
            "mode": "all",
            "max-examples": MAX_EXAMPLES,
            "deterministic": True,
            "database": "none",
            "dictionaries": {
                "string": {"dictionary": "edge-strings", "probability": 0.25},
                "integer": {"dictionary": "edge-integers", "probability": 0.25},
            },
        },
        "phases": {"stateful": {"enabled": False}},
    }
)
schema = schemathesis.openapi.from_dict(_openapi(), config=CONFIG)


@dataclass
class Target:
    """The app under test (lifespan run by the fixture) and things that exist in it."""

    app: Any
    headers: dict[str, str]
    workload_id: str
    project: str


def _without_lifespan(app: FastAPI) -> Any:
    """The app for schemathesis, whose ASGI client would start its lifespan a second time."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return  # already started by the fixture's TestClient
        await app(scope, receive, send)

    return asgi


@dataclass
class Served:
    """One app per database for the whole module, its lifespan running."""

    app: FastAPI
    client: TestClient
    home: Path
    api: API | None = None  # the admin's, made again once the cases revoke its token


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The app every operation's cases call: made once per database, not once per
    operation (a fresh app cost about 1 s, 3 minutes over the 200 operations);
    what one operation's cases leave is input to the next.  Its secrets are
    hashed with 1,000 PBKDF2 rounds: the subject is the HTTP layer, and at 120,000
    each generated ``POST /token`` case cost about 0.1 s of CPU."""
    home = tmp_path_factory.mktemp("fuzz") / "home"
    with ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        patch.setattr(auth, "PBKDF2_ROUNDS", 1000)
        auth.dummy_hash.cache_clear()
        stack.callback(auth.dummy_hash.cache_clear)  # made again at full cost after
        url = None
        if request.param == "postgresql":
            server = request.getfixturevalue("postgres_server")
            url = stack.enter_context(contextmanager(migrated_database)(server))
        config = ServerConfig(
            data_dir=home, database_url=url, loop_interval_s=0.05, run_as="server"
        )
        app = create_app(config, backend=NullBackend())
        app.state.probe_node = probe_answer
        client = stack.enter_context(TestClient(app))
        yield Served(app, client, home)


def _admin(served: Served) -> API | None:
    try:
        return API(served.client, served.home)
    except AssertionError:  # 429: too many wrong secrets from this client just now
        return None


@pytest.fixture
def target(served: Served) -> Target:
    """Things each operation's cases aim at, made again for it (the cases before may
    have deleted them), and a new admin token (they may have revoked it)."""
    if served.api is None or served.api.get("/api/v1/me").status_code == 401:
        # A new token; after the POST /token cases, once their wrong secrets' wait ends.
        served.api = wait_until(lambda: _admin(served), 30, "a token for the admin")
    api = served.api
    submitted = api.submit("seed", "true", workers=1)
    if submitted.status_code == 409:  # still there from an operation before
        listed = api.get("/api/v1/workloads", params={"filterBy": "name==seed"})
        workload_id = listed.json()["workloads"][0]["id"]
    else:
        assert submitted.status_code == 202, submitted.text
        workload_id = submitted.json()["workloadId"]
    project = api.post("/api/v1/org-unit/projects", json={"name": "fuzz"})
    assert project.status_code in (201, 409), project.text
    return Target(
        app=_without_lifespan(served.app),
        headers=api.headers,
        workload_id=workload_id,
        project="fuzz",
    )


@schema.parametrize()
@schema.given(aim_at_existing=st.booleans())
# One app per database, shared by every case: state left by one case is input to the next.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
def test_api_conforms_to_its_openapi(
    case: schemathesis.Case, aim_at_existing: bool, target: Target
) -> None:
    if aim_at_existing:
        if case.path_parameters and "workload_id" in case.path_parameters:
            case.path_parameters["workload_id"] = target.workload_id
        if case.path_parameters and "key" in case.path_parameters:
            case.path_parameters["key"] = target.project
        if isinstance(case.body, dict) and "projectId" in case.body:
            case.body["projectId"] = target.project
    if case.query and "follow" in case.query:
        del case.query["follow"]  # would stream forever (see the module doc)
    case.call_and_validate(
        app=target.app,
        headers=target.headers,
        checks=[not_a_server_error, response_schema_conformance, content_type_conformance],
    )

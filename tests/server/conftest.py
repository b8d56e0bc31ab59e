"""Server fixtures: an in-process app on SQLite (and PostgreSQL), and a real server process."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from ringleader.connection import wait_healthy
from ringleader.server import db
from ringleader.server.app import create_app
from ringleader.server.config import ServerConfig
from ringleader.server.inventory import simulated_nodes
from ringleader.server.migrate import upgrade
from tests.conftest import wait_until
from tests.fixtures.postgres import pg_app_url, pg_url, postgres_server  # noqa: F401
from tests.helpers import phases as phases_helper
from tests.helpers.autostart import fresh  # noqa: F401 (the fixture: a fresh home)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """A migrated SQLite database of the test module's own, for tests of the door
    (``phases``) and the services on real rows without a server."""
    url = db.default_database_url(Path(tmp_path_factory.mktemp("rows")))
    upgrade(url)
    engine = db.make_engine(url)
    yield engine
    engine.dispose()


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    """A session on ``engine`` whose work is rolled back at the end: tests never see
    each other's rows."""
    with db.session_factory(engine)() as session:
        yield session
        session.rollback()


class API:
    """A TestClient with the admin's token, plus helpers to wait on workloads."""

    def __init__(self, client: TestClient, home: Path) -> None:
        self.client = client
        self.home = home
        creds = json.loads((home / "credentials.json").read_text())
        self.creds = creds
        response = client.post(
            "/api/v1/token",
            json={
                "grantType": "client_credentials",
                "clientID": creds["clientId"],
                "clientSecret": creds["clientSecret"],
            },
        )
        assert response.status_code == 200, response.text
        self.token = response.json()["accessToken"]
        self.headers = {"Authorization": f"Bearer {self.token}"}

    def __getattr__(self, verb: str) -> Callable[..., httpx.Response]:
        method = getattr(self.client, verb)
        return lambda path, **kw: method(
            path, headers={**self.headers, **kw.pop("headers", {})}, **kw
        )

    def new_user(self, name: str) -> dict[str, str]:
        """A non-admin user with an access key; returns its Authorization header."""
        from ringleader.server.auth import create_access_key
        from ringleader.server.models import User

        with self.client.app.state.sessions() as s, s.begin():
            user = User(name=name, is_admin=False)
            s.add(user)
            s.flush()
            key = create_access_key(s, user)
        token = self.client.post(
            "/api/v1/token",
            json={
                "grantType": "client_credentials",
                "clientID": key.client_id,
                "clientSecret": key.client_secret,
            },
        ).json()["accessToken"]
        return {"Authorization": f"Bearer {token}"}

    def project_id(self, name: str = "default") -> str:
        return self.get(f"/api/v1/org-unit/projects/{name}").json()["id"]

    def submit(
        self, name: str, command: str, workers: int = 1, project: str = "default", **spec: Any
    ) -> httpx.Response:
        body = {
            "name": name,
            "projectId": self.project_id(project),
            "spec": {"command": command, "numWorkers": workers, **spec},
        }
        return self.post("/api/v1/workloads/distributed", json=body)

    def wait_phase(self, workload_id: str, phases: set[str], timeout: float = 90) -> dict[str, Any]:
        def read() -> dict[str, Any]:
            return self.get(f"/api/v1/workloads/{workload_id}").json()

        return phases_helper.wait_phase(
            read, phases_helper.actual_phase, phases, timeout, phases_helper.stayed
        )


def _app_client(
    tmp_path: Path, database_url: str | None, simulate: str | None = None
) -> Iterator[API]:
    home = tmp_path / "home"
    nodes = simulated_nodes(simulate) if simulate else None
    # As the server (root here): these tests run workloads with the server's interpreter,
    # which other OS users cannot run (tests/server/test_run_as.py runs them as users).
    config = ServerConfig(
        data_dir=home, database_url=database_url, loop_interval_s=0.1, nodes=nodes, run_as="server"
    )
    try:
        with TestClient(create_app(config)) as client:
            yield API(client, home)
    finally:
        stop_workloads(home)


@pytest.fixture(params=["sqlite", "postgresql"])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[API]:
    """The app in-process with the real local backend, on SQLite and on PostgreSQL.

    Each test gets a fresh database: SQLite in its ``tmp_path``, or a new
    database on the session's PostgreSQL server, already migrated (``pg_app_url``,
    dropped after).
    Without PostgreSQL the ``postgresql`` half is skipped, except with
    ``CI=true``, where it fails. A test that must run on SQLite only (a slow
    end-to-end run) says so with ``@SQLITE_ONLY``.
    """
    url = request.getfixturevalue("pg_app_url") if request.param == "postgresql" else None
    yield from _app_client(tmp_path, url)


SQLITE_ONLY = pytest.mark.parametrize("api", ["sqlite"], indirect=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def sim_api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[API]:
    """Like ``api``, on one simulated node with 4 GPUs (``--simulate-nodes 1x4gpu``)."""
    url = request.getfixturevalue("pg_app_url") if request.param == "postgresql" else None
    yield from _app_client(tmp_path, url, simulate="1x4gpu")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``ringleader server`` as a real process, with a CLI runner bound to it."""

    def __init__(self, home: Path, *server_args: str) -> None:
        self.home = home
        self.server_args = server_args
        self.env = {**os.environ, "RINGLEADER_HOME": str(home)}
        self._take_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.python = sys.executable  # what the server runs under
        self.account: tuple[int, int] | None = None  # (uid, gid) it runs as; None: ours
        # Added unless server_args name --run-as; () starts it as a user would, flag-less.
        self.default_args: tuple[str, ...] = ("--run-as", "server")

    def _take_port(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env["RINGLEADER_URL"] = self.url

    def start(self) -> None:
        """Start it and wait until it answers. A port picked free can be taken by
        another process (the other test worker's) before the server binds it (seen
        in a suite run): then it starts again on a fresh one, at most twice."""
        for tries_left in (2, 1, 0):
            self.home.mkdir(parents=True, exist_ok=True)
            log_path = self.home / "server-test.log"
            seen = log_path.stat().st_size if log_path.exists() else 0
            if self._started():
                return
            said = log_path.read_bytes()[seen:].decode(errors="replace")
            if "Address already in use" not in said or not tries_left:
                raise AssertionError(log_path.read_text())
            self.proc.wait(timeout=30)  # type: ignore[union-attr]
            self._take_port()

    def _started(self) -> bool:
        log = open(self.home / "server-test.log", "ab")  # noqa: SIM115
        account = self.account
        self.proc = subprocess.Popen(
            [
                self.python,
                "-m",
                "ringleader",
                "server",
                "--port",
                str(self.port),
                *(() if "--run-as" in self.server_args else self.default_args),
                *self.server_args,
            ],
            env=self.env,
            stdout=log,
            stderr=log,
            start_new_session=True,
            **({"user": account[0], "group": account[1], "extra_groups": []} if account else {}),
        )
        return wait_healthy(self.url, self.proc, 60)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def cli(
        self,
        *args: str,
        timeout: float = 120,
        creds: tuple[str, str] | None = None,
        cwd: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """The CLI against this server, as its admin or as the access key ``creds``."""
        env = self.env
        if creds is not None:
            env = {**env, "RINGLEADER_CLIENT_ID": creds[0], "RINGLEADER_CLIENT_SECRET": creds[1]}
        return subprocess.run(
            [sys.executable, "-m", "ringleader", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
        )

    def submit_dist(self, name: str, cwd: Path, *flags: str, command: str) -> str:
        """``submit-dist pytorch NAME --workers 1 FLAGS --command -- sh -c COMMAND`` from
        ``cwd`` (1 master, 1 worker); the workload's id."""
        done = self.cli("submit-dist", "pytorch", name, "--workers", "1", *flags, "--command",
                        "--", "sh", "-c", command, cwd=str(cwd))  # fmt: skip
        assert done.returncode == 0, done.stderr
        found = re.search(r"\(id (\w+),", done.stdout)
        assert found, done.stdout
        return found.group(1)

    def event_messages(self, name: str, reason: str) -> list[str]:
        """The messages of ``name``'s events with ``reason``, from ``describe -o json``:
        the text view wraps or folds a long message, and picks a table or phrases by
        the terminal's width, so a pattern over it can miss what is there."""
        done = self.cli("describe", name, "-o", "json")
        assert done.returncode == 0, done.stderr
        events = json.loads(done.stdout)["events"]
        return [e.get("message") or "" for e in events if e.get("reason") == reason]

    def wait_status(self, name: str, want: set[str], timeout: float = 180) -> str:
        """``describe NAME`` once its Status is one of ``want``."""

        def status() -> str | None:
            text = self.cli("describe", name).stdout
            found = re.search(r"Status:\s+(\w+)", text)
            return text if found and found.group(1) in want else None

        return str(wait_until(status, timeout, f"{name} in {want}"))


def stop_workloads(home: Path) -> None:
    """Stop whatever workload still runs under ``home`` (detached supervisors outlive a
    killed server by design, so a test's teardown must end them itself), and remove
    its runs' cgroups."""
    from ringleader.server.backends.local import LocalBackend
    from ringleader.server.backends.local.processes import clean_stale_cgroups

    backend = LocalBackend(grace_s=1.0)
    for run_dir in sorted((home / "runs").glob("*")):
        backend.cancel(str(run_dir))
    # What the server's next start would sweep (its runs' empty cgroups): the home
    # goes with the test, so no server will.
    if backend.cgroups is not None and (home / "runs").is_dir():
        clean_stale_cgroups(backend.cgroups, home / "runs")


#: The marks a test account's ~/.bashrc leaves in an interactive shell (``account_home``).
BASHRC_MARK, BASHRC_PATH = "FROM_BASHRC=read", "/nonexistent/bashrc-shims"


def account_home(path: Path) -> Path:
    """A home for the account pods run as in a test, with a ~/.bashrc of the test's.

    Why: an interactive ``bash`` in a pod reads its account's ~/.bashrc, and the
    machine's root one (pyenv's init) rehashes under a lock file; a shell killed
    mid-way leaves the lock, and every later shell waited 60 s for it before its
    prompt. This one sets a mark and puts a directory in front of ``PATH``, as a
    version manager's would, so a test sees that it was read and went after the
    pod's own ``PATH``."""
    path.mkdir(parents=True, exist_ok=True)
    (path / ".bashrc").write_text(f"export {BASHRC_MARK}\nPATH={BASHRC_PATH}:$PATH\n")
    return path


@contextlib.contextmanager
def running_server(home: Path, *server_args: str) -> Iterator[ServerProcess]:
    """A started server process on ``home``; afterwards it is killed and the workloads
    it started (which outlive it by design) are stopped."""
    proc = ServerProcess(home, *server_args)
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()
        stop_workloads(proc.home)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with running_server(tmp_path / "home") as proc:
        yield proc

"""A benchmark's control plane: one real server process on a fresh home and database.

Shared by bench/control_plane.py, control_plane_abuse.py and control_plane_stalls.py:
``Server`` (``ringleader server``, or its own code with the background work off or
against a stub backend: the ``--serve`` modes of this file, run in the server's
process) and ``Databases`` (a SQLite file per home, or a fresh PostgreSQL database
on a throw-away cluster).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent


API = "/api/v1/workloads"


ACTIVE = ("Creating", "Pending", "Initializing", "Running", "Degraded", "Resuming", "Unknown")


FINAL = ("Completed", "Failed", "Stopped")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One control-plane process on its own home (and database), with an admin client.

    ``mode`` is ``real`` (``ringleader server``, local backend) or ``api`` / ``held``
    (this file's ``--serve``; bench/control_plane.py's docstring says what each does).
    """

    def __init__(
        self,
        home: Path,
        database_url: str | None,
        mode: str = "real",
        env: dict[str, str] | None = None,
    ) -> None:
        self.home = home
        self.extra_env = env or {}
        self.database_url = database_url
        self.mode = mode
        self.port = 0
        self.url = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.http: httpx.Client | None = None
        self.headers: dict[str, str] = {}
        self.project_id = ""

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        py = sys.executable
        if self.mode == "real":
            argv = [py, "-m", "ringleader", "server", "--port", str(self.port)]
            argv += ["--run-as", "server"]  # the venv's interpreter is root's alone here
        else:
            argv = [py, str(Path(__file__).resolve()), "--serve", self.mode, "--port"]
            argv.append(str(self.port))
        env = {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}
        env["RINGLEADER_HOME"] = str(self.home)
        env.update(self.extra_env)
        if self.database_url:
            env["RINGLEADER_DATABASE_URL"] = self.database_url
        with open(self.home / "server-bench.log", "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        from ringleader.connection import wait_healthy

        if not wait_healthy(self.url, self.proc, 60):
            raise RuntimeError(f"server did not start:\n{self.log_tail()}")
        creds = json.loads((self.home / "credentials.json").read_text())
        self.http = httpx.Client(base_url=self.url, timeout=60)
        response = self.http.post(
            "/api/v1/token",
            json={
                "grantType": "client_credentials",
                "clientID": creds["clientId"],
                "clientSecret": creds["clientSecret"],
            },
        )
        response.raise_for_status()
        self.headers = {"Authorization": f"Bearer {response.json()['accessToken']}"}
        self.project_id = self.get("/api/v1/org-unit/projects/default")["id"]

    def log_tail(self) -> str:
        path = self.home / "server-bench.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        assert self.http is not None
        return self.http.request(method, path, headers=self.headers, **kw)

    def get(self, path: str, **kw: Any) -> Any:
        response = self.request("GET", path, **kw)
        response.raise_for_status()
        return response.json()

    def submit(self, name: str, command: str) -> str:
        response = self.request("POST", f"{API}/distributed", json=self.body(name, command))
        if response.status_code != 202:
            raise RuntimeError(f"submit {name}: {response.status_code} {response.text}")
        return response.json()["workloadId"]

    def body(self, name: str, command: str) -> dict[str, Any]:
        return {
            "name": name,
            "projectId": self.project_id,
            "spec": {"command": command, "numWorkers": 1},
        }

    def cpu_s(self) -> float:
        """User + system CPU seconds the server process has used so far."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        """Cancel what still runs (through the API), stop the server, sweep leftovers."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if self.mode == "real" and self.http is not None:
                with contextlib.suppress(Exception):
                    self._delete_active()
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.http is not None:
            self.http.close()
            self.http = None
        self.proc = None
        self._sweep()

    def _delete_active(self, timeout_s: float = 60.0) -> None:
        """DELETE every unfinished workload and wait until the loops have cancelled it."""
        active = [
            w["workloadId"]
            for w in self.get(API, params={"limit": "500"})["workloads"]
            if w["actualPhase"] in (*ACTIVE, "Stopping", "Deleting")
        ]
        for workload_id in active:
            self.request("DELETE", f"{API}/distributed/{workload_id}")
        deadline = time.monotonic() + timeout_s
        while active and time.monotonic() < deadline:
            active = [w for w in active if self.request("GET", f"{API}/{w}").status_code == 200]
            time.sleep(0.1)

    def _sweep(self) -> None:
        """Kill any process still carrying the job id of a run this server started
        (a ``real`` server's: the other modes start none, and thousands of run
        directories would each walk /proc)."""
        runs = self.home / "runs"
        if self.mode != "real" or not runs.is_dir():
            return
        from ringleader.server.backends.local.processes import sweep_job

        for run_dir in runs.iterdir():
            sweep_job(f"rl-{run_dir.name}", grace_s=2.0)


class Databases:
    """Fresh stores on demand: a SQLite file per home, or a new PostgreSQL database."""

    def __init__(self, tmp: Path, kinds: list[str]) -> None:
        self.tmp = tmp
        self.kinds = kinds
        self.pg: Any = None
        self.count = 0

    def start(self) -> None:
        if "postgresql" not in self.kinds:
            return
        sys.path.insert(0, str(ROOT))  # the tests' fixture module knows how to run postgres
        from tests.fixtures.postgres import PostgresServer, postgres_bindir

        bindir = postgres_bindir()
        if bindir is None:
            raise SystemExit(
                "PostgreSQL server binaries are missing (apt: postgresql); "
                "install them or pass --databases sqlite"
            )
        self.pg = PostgresServer(bindir)
        self.pg.init()
        self.pg.start()

    def stop(self) -> None:
        if self.pg is not None:
            self.pg.stop()
            self.pg = None

    def fresh(self, kind: str, label: str) -> tuple[Path, str | None, str]:
        """(home, URL given to the server or None for its default, URL for direct access)."""
        self.count += 1
        home = self.tmp / f"{kind}-{label}-{self.count}"
        if kind == "sqlite":
            return home, None, f"sqlite:///{home / 'ringleader.db'}"
        name = f"bench_{label.replace('-', '_')}_{self.count}_{uuid.uuid4().hex[:6]}"
        self.pg.admin(f'CREATE DATABASE "{name}"')
        url = self.pg.url(name)
        return home, url, url

    def version(self, kind: str) -> str:
        if kind == "sqlite":
            import sqlite3

            return f"SQLite {sqlite3.sqlite_version}"
        return f"PostgreSQL {self.pg.bindir.parent.name} (fsync off, synchronous_commit off)"


def held_backend() -> Any:
    """A backend that accepts every workload at once and never runs it: its pods
    stay Pending (a full cluster)."""
    from ringleader.server.backends.base import Backend, BackendStatus, Capabilities

    class HeldBackend(Backend):
        name = "held"
        capabilities = Capabilities(multi_node=True)

        def plan(self, request: Any) -> Any:
            return request

        def submit(self, plan: Any) -> str:
            return f"held:{plan.workload_id}"

        def poll(self, handle: str) -> Any:
            return BackendStatus("Initializing", message="held by the benchmark")

        def is_live(self, handle: str) -> bool:
            return False

        def stop(self, handle: str) -> None:
            return None

        def logs(self, handle: str, pod: str | None = None, tail: int | None = None) -> Any:
            return iter(())

    return HeldBackend()


def serve(mode: str, port: int) -> None:
    """``ringleader server --port PORT``'s own code: the background work off (``api``),
    or against a held backend (``held``) or a stub whose stops hang (``slowstop``)."""
    from control_plane_stalls import SlowStopBackend
    from ringleader.cli.server import serve as run_server
    from ringleader.server.config import ServerConfig

    config = ServerConfig(host="127.0.0.1", port=port, background=mode != "api", run_as="server")
    backend = {"api": None, "held": held_backend, "slowstop": SlowStopBackend}[mode]
    run_server(config, backend() if backend else None)


def main() -> int:
    """``python bench/bench_server.py --serve MODE --port PORT``: what ``Server`` starts
    for a mode other than ``real``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", choices=("api", "held", "slowstop"), required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    serve(args.serve, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Python SDK over the REST API; the CLI talks to the server only through it.

Where it connects: ``RINGLEADER_URL`` or the ``url`` of
``$RINGLEADER_HOME/config.json``; credentials from ``RINGLEADER_CLIENT_ID``/
``RINGLEADER_CLIENT_SECRET`` or ``$RINGLEADER_HOME/credentials.json`` (written
0600 by the embedded server on its first start).  With nothing configured
and nothing listening, ``Client.connect(autostart=True)`` starts the
embedded server in the background, as the first ``submit`` does.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from ringleader.errors import Conflict, InvalidSpec, NotFound, RingleaderError, Unauthorized
from ringleader.server.config import DEFAULT_PORT, home_dir

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

LOCAL_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
START_TIMEOUT_S = 60.0


class APIError(RingleaderError):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


class RemoteNotFound(NotFound):
    """A 404 from the server; its message already names what is missing."""

    def __init__(self, message: str) -> None:
        RingleaderError.__init__(self, message)


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text}
    message = body.get("message") or body.get("detail")
    if isinstance(message, list):  # FastAPI validation errors: name each field
        message = "; ".join(
            f"{'.'.join(str(x) for x in e['loc'] if x != 'body')}: {e['msg']}" for e in message
        )
    kind = {401: Unauthorized, 404: RemoteNotFound, 409: Conflict, 422: InvalidSpec}.get(
        response.status_code
    )
    if kind is not None:
        raise kind(str(message))
    raise APIError(response.status_code, f"HTTP {response.status_code}: {message}")


def read_config(home: Path | None = None) -> dict[str, Any]:
    path = (home or home_dir()) / "config.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_config(updates: dict[str, Any], home: Path | None = None) -> None:
    home = home or home_dir()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = {**read_config(home), **updates}
    path = home / "config.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(data, indent=2) + "\n")


def start_local_server(home: Path) -> subprocess.Popen[bytes]:
    """Start the embedded server detached; it outlives this command."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = open(home / "server.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "ringleader", "server", "--port", str(DEFAULT_PORT)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        env={**os.environ, "RINGLEADER_HOME": str(home)},
    )
    log.close()
    return proc


class Client:
    def __init__(
        self, url: str, client_id: str, client_secret: str, project: str | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.client_id = client_id
        self.client_secret = client_secret
        self.project = project
        self._token: str | None = None
        self.http = httpx.Client(base_url=self.url, timeout=30.0)

    # ----- connecting ------------------------------------------------------
    @classmethod
    def connect(cls, *, autostart: bool = False, home: Path | None = None) -> Client:
        home = home or home_dir()
        config = read_config(home)
        url = os.environ.get("RINGLEADER_URL") or config.get("url") or LOCAL_URL
        if autostart and url == LOCAL_URL and not _healthy(url):
            proc = start_local_server(home)
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _healthy(url):
                # One that exited at once lost the port to another first command's
                # server, which may still be starting: wait for that one instead.
                lost_race = proc.poll() is not None and _port_taken(url)
                if (proc.poll() is not None and not lost_race) or time.monotonic() > deadline:
                    raise RingleaderError(
                        f"the local server did not start; see {home / 'server.log'}"
                    )
                time.sleep(0.1)
        client_id = os.environ.get("RINGLEADER_CLIENT_ID") or config.get("clientId")
        secret = os.environ.get("RINGLEADER_CLIENT_SECRET") or config.get("clientSecret")
        if not (client_id and secret):
            try:
                creds = json.loads((home / "credentials.json").read_text())
            except (OSError, ValueError):
                if url == LOCAL_URL and _healthy(url):
                    raise Unauthorized(
                        f"a server already listens on {url} but {home} holds no credentials "
                        "for it (it was started with another RINGLEADER_HOME, maybe by another "
                        "user): run `ringleader login`, or set RINGLEADER_URL to your own server"
                    ) from None
                raise Unauthorized(
                    "no credentials: run `ringleader login` (or start the local server, "
                    f"which writes "
                    f"{home / 'credentials.json'})"
                ) from None
            client_id, secret = creds["clientId"], creds["clientSecret"]
        return cls(
            url,
            client_id,
            secret,
            project=os.environ.get("RINGLEADER_PROJECT") or config.get("project"),
        )

    def token(self, fresh: bool = False) -> str:
        if self._token is None or fresh:
            response = self.http.post(
                "/api/v1/token",
                json={
                    "grantType": "client_credentials",
                    "clientID": self.client_id,
                    "clientSecret": self.client_secret,
                },
            )
            _raise_for(response)
            self._token = response.json()["accessToken"]
        return self._token

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        for fresh in (False, True):  # one retry with a new token if ours expired
            headers = {"Authorization": f"Bearer {self.token(fresh)}"}
            response = self.http.request(method, path, headers=headers, **kwargs)
            if response.status_code != 401:
                break
        _raise_for(response)
        return response

    # ----- API -------------------------------------------------------------
    def me(self) -> dict[str, Any]:
        return self.request("GET", "/api/v1/me").json()

    def submit_distributed(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", "/api/v1/workloads/distributed", json=body).json()

    def list_workloads(self, filters: list[str] | None = None, **params: Any) -> dict[str, Any]:
        return self.request(
            "GET", "/api/v1/workloads", params={"filterBy": filters or [], **params}
        ).json()

    def workload(self, workload_id: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v1/workloads/{workload_id}").json()

    def find(self, name: str, project: str | None = None) -> dict[str, Any]:
        """A workload by name (in ``project``, else the current one if it has it) or id."""
        filters = [f"name=={name}"]
        if project:
            filters.append(f"projectName=={project}")
        found = self.list_workloads(filters)["workloads"]
        if not found and not project:
            try:
                return self.workload(name)
            except NotFound:
                pass
        if not found:
            raise NotFound("workload", name)
        if len(found) > 1:
            current = [w for w in found if w["projectName"] == self.project]
            if len(current) == 1:
                return current[0]
            raise Conflict(f"{len(found)} workloads are named {name!r}; give -p PROJECT")
        return found[0]

    def action(self, workload_id: str, verb: str) -> dict[str, Any]:
        if verb == "delete":
            return self.request("DELETE", f"/api/v1/workloads/distributed/{workload_id}").json()
        return self.request("POST", f"/api/v1/workloads/distributed/{workload_id}/{verb}").json()

    def pods(self, workload_id: str) -> list[dict[str, Any]]:
        return self.request("GET", f"/api/v1/workloads/{workload_id}/pods").json()

    def events(self, workload_id: str) -> list[dict[str, Any]]:
        return self.request("GET", f"/api/v1/workloads/{workload_id}/events").json()

    def logs(self, workload_id: str, **params: Any) -> Iterator[str]:
        params = {k: v for k, v in params.items() if v not in (None, False)}
        headers = {"Authorization": f"Bearer {self.token()}"}
        with self.http.stream(
            "GET",
            f"/api/v1/workloads/{workload_id}/logs",
            params=params,
            headers=headers,
            timeout=None,
        ) as response:
            if response.status_code >= 400:
                response.read()
                _raise_for(response)
            yield from response.iter_lines()

    def exec_socket(
        self, workload_id: str, command: list[str], *, pod: str | None = None, tty: bool = False
    ) -> ClientConnection:
        """A WebSocket running ``command`` in a pod (protocol: ``server.exec_session``)."""
        from websockets.sync.client import connect

        params: list[tuple[str, str]] = [("command", word) for word in command]
        params += [("tty", "true" if tty else "false")]
        if pod:
            params.append(("pod", pod))
        url = httpx.URL(f"{self.url}/api/v1/workloads/{workload_id}/exec").copy_with(params=params)
        ws_url = str(url).replace("http://", "ws://", 1).replace("https://", "wss://", 1)
        headers = {"Authorization": f"Bearer {self.token()}"}
        return connect(ws_url, additional_headers=headers, max_size=None, open_timeout=30)

    def projects(self) -> list[dict[str, Any]]:
        return self.request("GET", "/api/v1/org-unit/projects").json()

    def get_project(self, key: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v1/org-unit/projects/{key}").json()

    def create_project(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", "/api/v1/org-unit/projects", json=body).json()

    def update_project(self, key: str, resources: list[dict[str, Any]]) -> dict[str, Any]:
        return self.request(
            "PUT", f"/api/v1/org-unit/projects/{key}", json={"resources": resources}
        ).json()

    def delete_project(self, key: str) -> None:
        self.request("DELETE", f"/api/v1/org-unit/projects/{key}")

    def nodes(self) -> list[dict[str, Any]]:
        return self.request("GET", "/api/v1/nodes").json()

    def add_node(self, body: dict[str, Any]) -> dict[str, Any]:
        """Register an SSH host; the server probes it first (up to ~30 s)."""
        return self.request("POST", "/api/v1/nodes", json=body, timeout=60.0).json()

    def remove_node(self, name: str) -> None:
        self.request("DELETE", f"/api/v1/nodes/{name}")


def _port_taken(url: str) -> bool:
    parsed = httpx.URL(url)
    try:
        socket.create_connection((parsed.host, parsed.port or 80), timeout=1).close()
    except OSError:
        return False
    return True


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False

"""Typed Python SDK over the REST API; the CLI talks to the server only through it.

Requests and responses are pydantic models: a ``WorkloadSpec`` (``spec.py``)
goes in, ``WorkloadOut``/``Accepted``/``PodOut``... (``server/schemas.py``, which
imports nothing but pydantic) come back, and every HTTP error comes back as
its typed error from ``errors.py`` (``error_for``), so a caller catches
``NotFound`` or ``Conflict`` whether it runs in the server or talks to one.

Which server: ``RINGLEADER_URL`` (several, comma-separated: an active server and
its standbys, ``server/ha``); else the ``url`` of
``$RINGLEADER_HOME/config.json`` (``ringleader login --url``); else the server
that runs for this home, as its record says (``ringleader.home``: any port,
e.g. ``ringleader server --port 8478``); else ``LOCAL_URL``, where
``Client.connect(autostart=True)`` starts one in the background, as the first
``submit`` does.  Credentials: ``RINGLEADER_CLIENT_ID``/``RINGLEADER_CLIENT_SECRET``
or ``$RINGLEADER_HOME/credentials.json`` (written 0600 by the server on its
first start); in a pod, ``RINGLEADER_TOKEN``, the submitting user's token the
server gave it, used as it is (it cannot be renewed: it ends with the workload).

Here: connecting, the token, ``request`` and the workload calls; mixins in their own
modules hold the rest: ``client_assets`` (environments, compute resources),
``client_org`` (projects, nodes, users, members, access keys) and ``client_failover``
(which of several servers answers).

Example::

    from ringleader.client import Client
    from ringleader.spec import DistributedSpec, WorkloadSpec

    c = Client.connect()
    spec = WorkloadSpec(name="mnist", project_id="default",
                        spec=DistributedSpec(num_workers=2, command="python train.py"))
    accepted = c.submit_distributed(spec)
    print(c.workload(accepted.workload_id).actual_phase)
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from pydantic import BaseModel

from ringleader import client_token_cache as token_cache
from ringleader.client_assets import AssetCalls, request_json
from ringleader.client_errors import raise_for, retry_after, unreachable_detail
from ringleader.client_failover import SAFE_METHODS, Failover, split_urls
from ringleader.client_org import OrgCalls
from ringleader.connection import (
    LOCAL_URL,
    configured_url,
    current_project,
    healthy,
    local_server,
    port_taken,
    read_config,
    server_url,
    url_source,
)
from ringleader.defaults import home_dir
from ringleader.errors import (
    Conflict,
    NotFound,
    ServerUnreachable,
    Unauthorized,
)
from ringleader.server.schemas import (
    Accepted,
    EventOut,
    MeOut,
    PodOut,
    WorkloadList,
    WorkloadOut,
)
from ringleader.spec import WorkloadSpec

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

M = TypeVar("M", bound=BaseModel)
# Pauses before each resend of a submission the server may not have answered (the
# Idempotency-Key makes a resend safe); then the last failure is raised.
SUBMIT_RETRY_PAUSES_S = (0.5, 1.0)
# How long ``token`` waits in all, as the server's Retry-After asks, before a 429 is raised.
TOKEN_RETRY_BUDGET_S = 30.0


def _listens(url: str) -> bool:
    """Something answers at ``url`` (a server, healthy or busy; any one of a comma-separated
    list); False for a bad URL."""
    for one in split_urls(url):
        try:
            if httpx.URL(one).scheme in ("http", "https") and (healthy(one) or port_taken(one)):
                return True
        except (httpx.InvalidURL, OSError):
            continue
    return False


class Client(AssetCalls, OrgCalls, Failover):
    """One user's session with one server: a bearer token, renewed once when it expires."""

    def __init__(
        self,
        url: str,
        client_id: str,
        client_secret: str,
        project: str | None = None,
        token: str | None = None,
        source: str | None = None,
        token_file: Path | None = None,
    ) -> None:
        """``token`` alone (no key): a bearer token used as it is, never renewed;
        ``source``: where ``url`` came from, named when no server answers there;
        ``url`` may list several servers (comma-separated): calls go to the active one;
        ``token_file``: where the key's token is kept between commands
        (``client_token_cache``; the CLI's home), None: in this object only."""
        self.urls = split_urls(url)
        self.url = self.urls[0]
        self.source = source
        self.client_id = client_id
        self.client_secret = client_secret
        self.project = project
        self._token: str | None = token
        self._fixed_token = bool(token) and not client_id
        self.token_file = None if self._fixed_token else token_file
        self.http = httpx.Client(base_url=self.url, timeout=30.0)

    @contextlib.contextmanager
    def _reaching(self) -> Iterator[None]:
        """Turn a failure to reach the server (refused, no such host, timed out, a bad
        URL, a connection broken mid-answer) into ``ServerUnreachable``, naming the URL."""
        try:
            yield
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise ServerUnreachable(self.url, unreachable_detail(exc), self.source) from None

    # ----- connecting ------------------------------------------------------
    @classmethod
    def connect(cls, *, autostart: bool = False, home: Path | None = None) -> Client:
        """A client for this home's server (see the module's docstring for which one)."""
        home = home or home_dir()
        config = read_config(home)
        url = configured_url(home)
        if url is None:
            url = local_server(home) if autostart else server_url(home)
        client_id = os.environ.get("RINGLEADER_CLIENT_ID") or config.get("clientId")
        secret = os.environ.get("RINGLEADER_CLIENT_SECRET") or config.get("clientSecret")
        source = url_source(home)
        pod_token = os.environ.get("RINGLEADER_TOKEN")
        if pod_token and not os.environ.get("RINGLEADER_CLIENT_ID"):  # in a pod
            return cls(url, "", "", project=current_project(home), token=pod_token, source=source)
        if not (client_id and secret):
            try:
                creds = json.loads((home / "credentials.json").read_text())
            except (OSError, ValueError):
                if not _listens(url):  # first things first: the server, then its credentials
                    usable = url.startswith(("http://", "https://"))
                    what = "nothing listens there" if usable else "not an http:// or https:// URL"
                    raise ServerUnreachable(url, what, source) from None
                if url == LOCAL_URL and healthy(url):
                    raise Unauthorized(
                        f"a server already listens on {url} but {home} holds no credentials "
                        "for it (it was started with another RINGLEADER_HOME, maybe by another "
                        "user)\n  fix: log in to it with a key its admin gives you (`ringleader "
                        "login --client-id ID --client-secret SECRET`), or start your own on "
                        "another port (`ringleader server --port 8471 --run-as server` in "
                        "another shell): this home's commands then use it"
                    ) from None
                raise Unauthorized(
                    "no credentials: run `ringleader login` (or start the local server, "
                    f"which writes {home / 'credentials.json'})"
                ) from None
            client_id, secret = creds["clientId"], creds["clientSecret"]
        return cls(
            url,
            client_id,
            secret,
            project=current_project(home),
            source=source,
            token_file=home / token_cache.FILE,
        )

    def token(self, fresh: bool = False) -> str:
        """A bearer token for this key (cached; ``fresh`` asks for a new one).

        The token endpoint is rate limited: a 429 is retried after the
        Retry-After it names, for up to ``TOKEN_RETRY_BUDGET_S`` in all.
        """
        if self._fixed_token:  # a pod's token: there is no key to get another with
            return self._token or ""
        if self._token is None and not fresh and self.token_file is not None:
            self._token = token_cache.load(self.token_file, self.url, self.client_id)
        if self._token is None or fresh:
            body = {
                "grantType": "client_credentials",
                "clientID": self.client_id,
                "clientSecret": self.client_secret,
            }
            waited = 0.0
            while True:
                # A second token, if a lost answer makes us ask twice, is harmless.
                response = self._send("POST", "/api/v1/token", retry_safe=True, json=body)
                delay = retry_after(response)
                if delay is None or waited + delay > TOKEN_RETRY_BUDGET_S:
                    break
                time.sleep(delay)  # the server said when; nothing to poll meanwhile
                waited += delay
            if response.status_code in (404, 405, 501):  # something else listens there
                raise ServerUnreachable(
                    self.url,
                    f"what answers there is no ringleader server (HTTP {response.status_code} "
                    "to /api/v1/token)",
                    self.source,
                )
            raise_for(response)
            issued = response.json()
            self._token = issued["accessToken"]
            if self.token_file is not None:
                expires_in = float(issued.get("expiresIn") or 0)
                token_cache.save(self.token_file, self.url, self.client_id, self._token, expires_in)
        return self._token

    def revoke_token(self) -> None:
        """End this client's token (a logout); the next call gets a new one."""
        if self._token is not None:
            self.request("DELETE", "/api/v1/token")
            self._token = None
        if self.token_file is not None:
            token_cache.forget(self.token_file)

    def request(
        self, method: str, path: str, headers: dict[str, str] | None = None, **kwargs: Any
    ) -> httpx.Response:
        """One authenticated call; an error status raises its typed error."""
        for fresh in (False, True):  # one retry with a new token if ours expired
            headers = {**(headers or {}), "Authorization": f"Bearer {self.token(fresh)}"}
            # Sent again after a lost answer only when that cannot do it twice: a read,
            # or a submission with its Idempotency-Key.
            safe = method in SAFE_METHODS or "Idempotency-Key" in headers
            response = self._send(method, path, retry_safe=safe, headers=headers, **kwargs)
            if response.status_code != 401:
                break
            if self._fixed_token:
                raise Unauthorized(
                    "RINGLEADER_TOKEN was refused: a pod's token ends with its workload "
                    "(or was revoked); outside a pod, unset it and log in"
                )
        raise_for(response)
        return response

    def _get(self, model: type[M], path: str, **kwargs: Any) -> M:
        return model.model_validate(self.request("GET", path, **kwargs).json())

    def _get_list(self, model: type[M], path: str, wrapped_in: str | None = None) -> list[M]:
        """A list endpoint's items; ``wrapped_in``: the key of Run:ai's wrapped lists
        (``{"pods": [...]}``)."""
        body = self.request("GET", path).json()
        items = body[wrapped_in] if wrapped_in else body
        return [model.model_validate(item) for item in items]

    # ----- workloads -------------------------------------------------------
    def me(self) -> MeOut:
        return self._get(MeOut, "/api/v1/me")

    def submit_distributed(self, spec: WorkloadSpec) -> Accepted:
        """Record the intent to run ``spec``; the server's loops place and start it.

        Sent with an ``Idempotency-Key`` of its own and sent again, with the same key,
        when the server could not be reached or its answer was lost: the server then
        answers as it did the first time, so a retry never makes a second workload.
        """
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        body = request_json(spec)

        def send() -> Accepted:
            response = self.request(
                "POST", "/api/v1/workloads/distributed", headers=headers, json=body
            )
            return Accepted.model_validate(response.json())

        for pause in SUBMIT_RETRY_PAUSES_S:
            try:
                return send()
            except ServerUnreachable:
                time.sleep(pause)
        return send()  # the last try: its failure is the caller's

    def list_workloads(self, filters: list[str] | None = None, **params: Any) -> WorkloadList:
        """One page of workloads; ``filters`` are Run:ai's ``filterBy`` (``name==mnist``)."""
        return self._get(
            WorkloadList, "/api/v1/workloads", params={"filterBy": filters or [], **params}
        )

    def workload(self, workload_id: str) -> WorkloadOut:
        return self._get(WorkloadOut, f"/api/v1/workloads/{workload_id}")

    def find(self, name: str, project: str | None = None) -> WorkloadOut:
        """A workload by name (in ``project``, else the current one if it has it) or id."""
        filters = [f"name=={name}"]
        if project:
            filters.append(f"projectName=={project}")
        found = self.list_workloads(filters, view="full").workloads  # describe shows the spec
        if not found and not project:
            try:
                return self.workload(name)
            except NotFound:
                pass
        if not found:
            raise NotFound("workload", name)
        if len(found) > 1:
            current = [w for w in found if w.project_name == self.project]
            if len(current) == 1:
                return current[0]
            raise Conflict(f"{len(found)} workloads are named {name!r}; give -p PROJECT")
        return found[0]

    def action(self, workload_id: str, verb: str) -> Accepted:
        """``delete``, ``suspend`` or ``resume``: recorded now, carried out by the loops."""
        if verb == "delete":
            response = self.request("DELETE", f"/api/v1/workloads/distributed/{workload_id}")
        else:
            response = self.request("POST", f"/api/v1/workloads/distributed/{workload_id}/{verb}")
        return Accepted.model_validate(response.json())

    def pods(self, workload_id: str) -> list[PodOut]:
        return self._get_list(PodOut, f"/api/v1/workloads/{workload_id}/pods", "pods")

    def events(self, workload_id: str) -> list[EventOut]:
        return self._get_list(EventOut, f"/api/v1/workloads/{workload_id}/events", "events")

    def logs(self, workload_id: str, **params: Any) -> Iterator[str]:
        """The workload's log lines as they come (``follow=True``: until it ends)."""
        params = {k: v for k, v in params.items() if v not in (None, False)}
        for fresh in (False, True):  # a kept token the server refuses: one new one
            headers = {"Authorization": f"Bearer {self.token(fresh)}"}
            with (
                self._reaching(),
                self.http.stream(
                    "GET",
                    f"/api/v1/workloads/{workload_id}/logs",
                    params=params,
                    headers=headers,
                    timeout=None,
                ) as response,
            ):
                if response.status_code == 401 and not fresh and not self._fixed_token:
                    continue
                if response.status_code >= 400:
                    response.read()
                    raise_for(response)
                yield from response.iter_lines()
                return

    def exec_socket(
        self, workload_id: str, command: list[str], *, pod: str | None = None, tty: bool = False
    ) -> ClientConnection:
        """A WebSocket running ``command`` in a pod (protocol: ``server.exec_session``)."""
        params: list[tuple[str, str]] = [("command", word) for word in command]
        params += [("tty", "true" if tty else "false")]
        if pod:
            params.append(("pod", pod))
        url = httpx.URL(f"{self.url}/api/v1/workloads/{workload_id}/exec").copy_with(params=params)
        ws_url = str(url).replace("http://", "ws://", 1).replace("https://", "wss://", 1)
        from websockets.exceptions import InvalidStatus

        try:
            return self._ws_connect(ws_url, self.token())
        except InvalidStatus as exc:  # a kept token the server refuses: one new one
            if exc.response.status_code != 401 or self._fixed_token:
                raise
        return self._ws_connect(ws_url, self.token(fresh=True))

    def _ws_connect(self, ws_url: str, token: str) -> ClientConnection:
        from websockets.sync.client import connect

        headers = {"Authorization": f"Bearer {token}"}
        try:
            return connect(ws_url, additional_headers=headers, max_size=None, open_timeout=30)
        except OSError as exc:  # refused, or no answer in time (TimeoutError)
            raise ServerUnreachable(self.url, unreachable_detail(exc), self.source) from None

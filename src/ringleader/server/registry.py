"""The cluster's image registry: Debian's ``docker-registry`` (the CNCF distribution
registry), run by ringleader with its storage under the server's home.

Why: seed 004's first step is "package a docker image, push it to a registry, and
pull it to create a cluster with uniform images".  No public registry is
reachable from a cluster like ours, so ringleader runs one on the head node;
``ringleader image push`` puts an image there, and each host's agent pulls a
workload's image from it as its pull policy says (``launch/containers.py``).

Who may use it: the registry speaks plain HTTP (on 127.0.0.1 by default; a
cluster address with ``--host``) and requires a password for every request, push
and pull alike.  The password is made at start and kept in files of the home
(0600, the server's user's): ``htpasswd`` (bcrypt, the registry's only scheme)
and ``auth.json`` (podman's ``--authfile``).  So the server and its agents (root
on a shared server) pull and the admin pushes, while a tenant's shell, which
shares the host's network, can neither push over an image others run nor pull
one itself (what any user may do is run a workload in an image of it, as with
any registry the server pulls from).  The password goes only to the registry's
own port: every listening socket there must be the registry process's
(``launch/listeners.py``), checked at start, by the scheduler before it places
a workload whose image is there, and by each agent before it pulls.

While it does not answer (stopped, crashed, its host down), a workload whose image
is in it stays Pending saying so, and runs once it is back (``Reachability``, asked
by the scheduler's placing loop): a missing registry is a wait, not a failure.

Files, in ``HOME/registry/``: ``config.yml``, ``htpasswd``, ``auth.json``,
``address`` (``HOST:PORT``, written once it answers, and kept when it stops and
while it starts again: images named after it are still its), ``registry.pid``,
``registry.log`` and ``data/``.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from ringleader.cluster.images import require_tool
from ringleader.errors import RingleaderError
from ringleader.home import write_private
from ringleader.launch.listeners import owns_port, port_of
from ringleader.launch.procs import terminate
from ringleader.launch.registry_pull import MANIFESTS

USER = "ringleader"
BINARY = "docker-registry"
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
CATALOG_PAGE = 1_000  # the registry's most per page
CONFIG = """version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {data}
  delete:
    enabled: true
http:
  addr: {host}:{port}
auth:
  htpasswd:
    realm: ringleader
    path: {htpasswd}
"""


@dataclass(frozen=True)
class Registry:
    """A running registry: where it answers and the file podman logs in with."""

    address: str  # HOST:PORT
    authfile: str
    pid: int


def directory(home: Path) -> Path:
    return home / "registry"


def running(home: Path) -> Registry | None:
    """The registry this home runs, if its process is alive and is the registry."""
    where = directory(home)
    try:
        address = (where / "address").read_text().strip()
        pid = int((where / "registry.pid").read_text())
    except (OSError, ValueError):
        return None
    if not _is_ours(pid, where):
        return None
    return Registry(address, str(where / "auth.json"), pid)


def _is_ours(pid: int, where: Path) -> bool:
    """``pid`` is the registry serving ``where``'s config (not a pid reused since)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (
        str(where / "config.yml").encode() in argv
        and os.path.basename(argv[0]) == b"docker-registry"
    )


def start(home: Path, host: str = "127.0.0.1", port: int = 5000) -> Registry:
    """Start the registry for ``home`` (detached: it outlives this command); the
    running one when it already runs.  RingleaderError naming what failed."""
    found = running(home)
    if found is not None:
        return found
    binary = require_tool(BINARY, "docker-registry")
    where = directory(home)
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    (where / "data").mkdir(mode=0o700, exist_ok=True)
    password = secrets.token_urlsafe(24)
    write_private(where / "htpasswd", f"{USER}:{_bcrypt(password)}\n")
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    token = base64.b64encode(f"{USER}:{password}".encode()).decode()
    write_private(where / "auth.json", json.dumps({"auths": {address: {"auth": token}}}))
    config = CONFIG.format(data=where / "data", host=host, port=port, htpasswd=where / "htpasswd")
    write_private(where / "config.yml", config)
    with open(where / "registry.log", "ab") as log:
        proc = subprocess.Popen(
            [binary, "serve", str(where / "config.yml")],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # not ended with this command's terminal
            cwd=str(where),
        )
    write_private(where / "registry.pid", f"{proc.pid}\n")
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                last = _last_line(where / "registry.log")
                raise RingleaderError(f"the registry did not start on {address}: {last}")
            # Its own port: another listener there (a tenant's) is never taken for it.
            if owns_port(proc.pid, port) and _answers(address):
                write_private(where / "address", f"{address}\n")
                return Registry(address, str(where / "auth.json"), proc.pid)
            time.sleep(0.1)
        raise RingleaderError(f"the registry did not answer on {address} in {START_TIMEOUT_S:g} s")
    except BaseException:  # nothing half-started is left
        terminate([proc.pid], STOP_TIMEOUT_S, is_done=lambda: proc.poll() is not None)
        raise


def stop(home: Path) -> bool:
    """Stop this home's registry (its images stay in ``data/``); False if none ran."""
    found = running(home)
    if found is None:
        return False
    terminate([found.pid], STOP_TIMEOUT_S)  # its own session: its group is itself
    return True


class Reachability:
    """Whether images in this home's registry can be pulled now, asked by the
    scheduler once a cycle: its address is read and its port checked at most once,
    and not at all for a server that never started one (no ``address`` file)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        try:
            self.address = (directory(home) / "address").read_text().strip()
        except OSError:
            self.address = ""
        self._answering: bool | None = None

    def why_not(self, image: str) -> str:
        """Why ``image`` cannot be pulled now: it is in this registry, which does not
        answer as itself (its process on its port); "" otherwise."""
        if not self.address or not image.startswith(self.address + "/"):
            return ""
        if self._answering is None:
            found = running(self.home)
            self._answering = (
                found is not None
                and owns_port(found.pid, port_of(self.address))
                and _answers(self.address)
            )
        if self._answering:
            return ""
        return (
            f"image {image} is in the cluster registry at {self.address}, which does not "
            "answer (ringleader registry start); the workload runs once it is back"
        )


def _answers(address: str) -> bool:
    """The registry's API root answers (401 without a password: it is up)."""
    try:
        return httpx.get(f"http://{address}/v2/", timeout=1).status_code in (200, 401)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError):
        return False


def catalog(registry: Registry) -> dict[str, list[str]]:
    """Every repository the registry holds, with its tags."""
    auth = _credentials(registry)
    base = f"http://{registry.address}/v2"
    try:
        with httpx.Client(auth=auth, timeout=10) as client:
            names: list[str] = []
            url: str | None = f"{base}/_catalog?n={CATALOG_PAGE}"
            while url:  # the registry pages its catalog (at most 1,000 a page)
                page = client.get(url)
                page.raise_for_status()
                names += page.json()["repositories"] or []
                url = page.links.get("next", {}).get("url")
                url = str(page.url.join(url)) if url else None
            out: dict[str, list[str]] = {}
            for name in names:
                tags = client.get(f"{base}/{name}/tags/list").json().get("tags") or []
                out[name] = sorted(tags)
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise RingleaderError(f"cannot list the registry at {registry.address}: {exc}") from None
    return out


def image_id_of(registry: Registry, name: str, tag: str) -> str:
    """The ID of the image ``name:tag`` names in the registry now: its manifest's config
    digest, the ID podman gives the image wherever it is, pushed or pulled ("" when it
    cannot say, or the tag names a list of images): what a workload of that tag runs
    (``launch/registry_pull.pinned`` pins the manifest's digest)."""
    try:
        answer = httpx.get(
            f"http://{registry.address}/v2/{name}/manifests/{tag}",
            headers={"Accept": MANIFESTS},
            auth=_credentials(registry),
            timeout=10,
        )
        digest = answer.json()["config"]["digest"] if answer.status_code == 200 else ""
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return ""
    return digest.removeprefix("sha256:") if str(digest).startswith("sha256:") else ""


def _credentials(registry: Registry) -> tuple[str, str]:
    try:
        auths = json.loads(Path(registry.authfile).read_text())["auths"]
    except PermissionError:
        raise RingleaderError(
            f"the registry's password ({registry.authfile}) is its admin's alone: run this "
            "as the user that started it"
        ) from None
    user, _, password = base64.b64decode(auths[registry.address]["auth"]).decode().partition(":")
    return user, password


def _bcrypt(password: str) -> str:
    import bcrypt

    return bcrypt.hashpw(password.encode(), bcrypt.gensalt()).decode()


def _last_line(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1][-300:] if lines else "no output"

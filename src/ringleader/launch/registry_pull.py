"""Pulling from the cluster registry (server/registry.py): its password goes to its
own port only, on this host and on the others.

Why: the registry runs on the head node and needs a password for every pull.  On
the head, an agent reads the password file (``registry_dir``) itself, after
checking that every socket listening on the registry's port is the registry
process's (``listeners.owns_port``).  An SSH node has neither the file nor the
process to check: there the supervisor, on the head, checks the port and hands the
agent the password in its ``setup`` (over ssh, never on a command line or in a
file of the run), and the agent writes it to a 0600 file in its private run
directory only for the pull (``registry_flags``).

Container keys (``LaunchSpec.container``): ``registry_dir`` (on the head), or,
for another host, ``registry`` (``{"address", "auth"}``) or ``registry_refused``
(why not to pull from it).

Standard library only: the agent imports it.
"""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ringleader.launch import listeners

AUTH_FILE = "registry-auth.json"
DOCKER_CONFIG = "registry-docker-config"  # docker --config DIR (its config.json)
REFUSED = "registry_refused"


def _read(where: str) -> tuple[str, int, str] | None:
    """(address, pid, auth.json text) of the registry in ``where``, or None."""
    try:
        with open(os.path.join(where, "address")) as found:
            address = found.read().strip()
        with open(os.path.join(where, "registry.pid")) as found:
            pid = int(found.read().strip() or 0)
        with open(os.path.join(where, "auth.json")) as found:
            auth = found.read()
    except (OSError, ValueError):
        return None
    return (address, pid, auth) if address else None


def _not_served(image: str, address: str) -> str:
    return (
        f"image {image} is in the cluster registry, but {address} is not served by the "
        "registry's process now: not pulling from it (ringleader registry start)"
    )


def _loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def for_host(container: dict[str, Any], host: str, local: bool) -> dict[str, Any]:
    """``container`` as the agent on ``host`` gets it: unchanged on the head
    (``local``); for another host the registry's address and password instead of
    the head's directory, or why it must not pull from it (not served by the
    registry's process, or an address only the head reaches)."""
    where = str(container.get("registry_dir") or "")
    if local or not where:
        return container
    rest = {k: v for k, v in container.items() if k != "registry_dir"}
    image = str(container.get("image") or "")
    found = _read(where)
    if found is None or not image.startswith(found[0] + "/"):
        return rest
    address, pid, auth = found
    if not listeners.owns_port(pid, listeners.port_of(address)):
        return {**rest, REFUSED: _not_served(image, address)}
    if _loopback(address):
        return {
            **rest,
            REFUSED: f"image {image} is in the cluster registry at {address}, which host "
            f"{host} cannot reach: start it on an address the nodes reach "
            "(ringleader registry start --host ADDRESS) and push the image there",
        }
    return {**rest, "registry": {"address": address, "auth": auth}}


#: What the registry may answer for a tag: every manifest kind podman pushes.
MANIFESTS = ", ".join(
    (
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    )
)
PIN_TIMEOUT_S = 10.0


def pinned(container: dict[str, Any]) -> dict[str, Any]:
    """``container`` with its cluster-registry image by digest (``NAME@sha256:...``),
    as the registry has the tag now: every host runs the same image, and a host
    with a stale image under the tag pulls this one instead of running that.
    Unchanged for another image, one already by digest, or when the registry
    cannot say (not its process's port, no answer): then the pull says why."""
    where = str(container.get("registry_dir") or "")
    image = str(container.get("image") or "")
    found = _read(where) if where else None
    if found is None or not image.startswith(found[0] + "/") or "@" in image:
        return container
    address, pid, auth = found
    if not listeners.owns_port(pid, listeners.port_of(address)):
        return container
    path = image[len(address) + 1 :]
    slash, colon = path.rfind("/"), path.rfind(":")
    name, tag = (path[:colon], path[colon + 1 :]) if colon > slash else (path, "latest")
    try:
        token = json.loads(auth)["auths"][address]["auth"]
        request = urllib.request.Request(
            f"http://{address}/v2/{name}/manifests/{tag}",
            method="HEAD",
            headers={"Accept": MANIFESTS, "Authorization": f"Basic {token}"},
        )
        # No proxy: the password goes to the registry's own port, nowhere else.
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(request, timeout=PIN_TIMEOUT_S) as answer:
            digest = answer.headers.get("Docker-Content-Digest", "")
    except (OSError, ValueError, KeyError, TypeError):
        return container
    if not digest.startswith("sha256:"):
        return container
    return {**container, "image": f"{address}/{name}@{digest}"}


@contextmanager
def registry_flags(
    container: dict[str, Any], image: str, scratch: str, docker: bool = False
) -> Iterator[tuple[list[str], str]]:
    """While open: the pull's flags for an image in the cluster registry (plain
    HTTP and its password file), or why not to pull at all; none for any other
    image.  ``scratch``: a private directory for a handed password's file, which
    is removed when this closes.  ``docker``: its words (a ``--config`` directory
    holding ``config.json``; its daemon takes a loopback registry as plain HTTP)
    instead of podman's (``--tls-verify=false --authfile FILE``)."""
    given = container.get("registry")
    if isinstance(given, dict):
        address = str(given.get("address") or "")
        if not image.startswith(address + "/"):
            yield [], ""
            return
        with _password_file(str(given.get("auth") or ""), scratch, docker) as flags:
            yield flags, ""
        return
    if container.get(REFUSED):
        yield [], str(container[REFUSED])
        return
    where = str(container.get("registry_dir") or "")
    found = _read(where) if where else None
    if found is None or not image.startswith(found[0] + "/"):
        yield [], ""
        return
    address, pid, auth = found
    if not listeners.owns_port(pid, listeners.port_of(address)):
        yield [], _not_served(image, address)
        return
    if docker:  # its config file has the same shape, under its own name
        with _password_file(auth, scratch, docker) as flags:
            yield flags, ""
        return
    yield ["--tls-verify=false", "--authfile", os.path.join(where, "auth.json")], ""


@contextmanager
def _password_file(auth: str, scratch: str, docker: bool) -> Iterator[list[str]]:
    """``auth`` (``{"auths": {ADDRESS: {"auth": ...}}}``) in a 0600 file under
    ``scratch`` while open: podman's ``--authfile``, or docker's ``--config`` (a 0700
    directory whose ``config.json`` it is); both gone when this closes."""
    folder = os.path.join(scratch, DOCKER_CONFIG) if docker else scratch
    if docker:
        os.mkdir(folder, 0o700)
    path = os.path.join(folder, "config.json" if docker else AUTH_FILE)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(descriptor, "w") as out:
                out.write(auth)
            yield ["--config", folder] if docker else ["--tls-verify=false", "--authfile", path]
        finally:
            os.unlink(path)
    finally:
        if docker:
            os.rmdir(folder)

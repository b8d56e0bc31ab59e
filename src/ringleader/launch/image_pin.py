"""A ``localhost/`` image runs on every host as the head holds it, or not at all.

Why: an image named ``localhost/...`` comes from no registry (``podman build`` or
``image base`` here, copied to the other hosts with ``ringleader image sync``), so
no host can pull the right one: a host holding a stale image under the name would
run it.  The supervisor notes the head's image ID (the digest of its config, which
``save`` and ``load`` keep) in the gang's container; each host's agent compares its
own before any rank starts, and a host whose image differs fails the gang saying
so, with the fix (``image sync``).  A cluster-registry image is pinned by digest
instead (``registry_pull.pinned``); an image of another registry is pulled as its
policy says.

Standard library only: the agent imports it.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

#: The container key with the head's image ID.
EXPECTED_ID = "image_id"
HOST = "image_host"  # the host's name as the head knows it (its ssh target)
INSPECT_TIMEOUT_S = 60.0


def inspect_image(runtime: str, image: str, form: str) -> str | None:
    """``runtime image inspect --format FORM`` of ``image`` here; None when it has no
    such image or cannot say (the runtime missing, slow or failing)."""
    try:
        done = subprocess.run(
            [runtime, "image", "inspect", "--format", form, "--", image],
            capture_output=True, text=True, timeout=INSPECT_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def image_id(runtime: str, image: str) -> str:
    """This host's ID of ``image``, or "" when it has none (or cannot say); without
    docker's ``sha256:`` in front, so podman's and docker's IDs of one image match."""
    return (inspect_image(runtime, image, "{{.Id}}") or "").removeprefix("sha256:")


def pinned_here(container: dict[str, Any], remote_hosts: bool) -> dict[str, Any]:
    """``container`` with the head's ID of its ``localhost/`` image, when other hosts
    run it too and the head holds it; else unchanged."""
    image = str(container.get("image") or "")
    if not remote_hosts or not image.startswith("localhost/") or "@" in image:
        return container
    runtime = shutil.which(str(container.get("runtime") or "podman"))
    found = image_id(runtime, image) if runtime else ""
    return {**container, EXPECTED_ID: found} if found else container


def pinned_for(container: dict[str, Any], host: str) -> dict[str, Any]:
    """``container`` for ``host``'s agent: its name as the head knows it, for the fix."""
    return {**container, HOST: host} if container.get(EXPECTED_ID) else container


def drift(runtime: str, container: dict[str, Any]) -> str:
    """Why this host's image is not the head's ("" when it is, or nothing was noted)."""
    expected = str(container.get(EXPECTED_ID) or "")
    if not expected:
        return ""
    image = str(container["image"])
    here = image_id(runtime, image)
    if here == expected:
        return ""
    return (
        f"this host's image {image} is {here[:12] or 'missing'}, the head's is "
        f"{expected[:12]}: copy the head's with "
        f"`ringleader image sync {image} {container.get(HOST) or 'HOST'}`"
    )

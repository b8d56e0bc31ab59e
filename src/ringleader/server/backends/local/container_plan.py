"""The container part of a local plan: ``LaunchSpec.container`` for a workload with
an image, and which of the workload's own directories its containers see.

Kept apart from ``planning`` so that each reads whole: there, the gang's shape (its
pods, their ranks, environments, cores and cgroups); here, what an image's pods get
from this machine, which the admin's ``ImagePolicy`` bounds (host paths, the pull's
time) and the agent's ``launch/containers.py`` carries out.  Together they were past
the house's 400 lines.

Invariant (``planning``'s): pure; the runtime, the policy and the directories are
passed in, and a request without an image, or without a runtime for it here, gets
no container (``{}``).
"""

from __future__ import annotations

from ringleader.server.backends.base import DEFAULT_IMAGES, BackendRequest, ImagePolicy, RunAs
from ringleader.server.host_paths import planned


def own_mounts(own_dir: str, run_as: RunAs | None) -> list[str]:
    """What of the workload's own directory its containers see: all of it in the
    account's home; of a run dir of the server's (``--run-as server``), only the
    checkpoints and metrics its variables name (not launch.json or the logs)."""
    if run_as is not None:
        return [own_dir]
    return [f"{own_dir}/checkpoints", f"{own_dir}/metrics"]


def container_of(
    request: BackendRequest,
    runtime: dict[str, str] | None,
    python: str,
    mounts: list[str],
    images: ImagePolicy = DEFAULT_IMAGES,
) -> dict[str, object]:
    """``LaunchSpec.container`` for ``request``: empty without an image or a
    ``runtime`` (None where the image does not run in a container here: the caller
    decided, ``images.runs_in_container``).  ``mounts``: the workload's own directory
    in its account's home (checkpoints, metrics), opened as the account by the agent
    like the working directory; ``python``: what the agent's helper that opens them
    runs (one the account can run); ``images``: the admin's policy (the directories
    host-path volumes may really be in, checked by the agent as opened; the pull's
    time)."""
    image = request.image
    if not image or runtime is None:
        return {}
    return {
        "runtime": runtime["name"],
        "image": image,
        "mounts": mounts,
        "python": python,
        # Kubernetes' rule: a command replaces the image's entrypoint; args alone are
        # the arguments of its entrypoint (they replace its default arguments).
        "entrypoint": bool(request.spec.master().command),
        "pull": request.spec.master().image_pull_policy or request.spec.spec.image_pull_policy,
        # Its pods stay up after their command for exec/bash (keepalive.IMAGE_KEEPALIVE).
        "interactive": bool(request.spec.spec.interactive),
        "volumes": planned(request.spec),  # [host path, mount path, read-only]
        "allowed": list(images.host_paths),
        "pull_timeout": images.pull_timeout_s,
        "registry_dir": images.registry_dir,
    }

"""Container images on a node without a container runtime.

ringleader's local backend runs pods as processes in the server's own
Python environment; it cannot pull or run an image.  Rather than silently
ignoring ``-i IMAGE``, a workload naming an image is rejected unless the
image is one of the walkthrough images in ``STAND_INS``, for which
ringleader ships an equivalent program and says so in the workload's events.
This lets the Run:ai walkthroughs (seeds 001 and 002) run as written.

Invariants:
- ``STAND_INS`` is the one table of stand-in images;
- an image reference names a stand-in with or without its tag
  (``kubeflow/pytorch-dist-mnist`` is ``kubeflow/pytorch-dist-mnist:latest``,
  as ``docker pull`` reads it) and with or without Docker Hub's registry
  prefix; another tag or a digest is another image, refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringleader.errors import InvalidSpec
from ringleader.launch.containers import bad_reference, image_present

DEFAULT_TAG = "latest"  # what a reference without a tag means (Docker's rule)
DOCKER_HUB = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")


@dataclass(frozen=True)
class StandIn:
    """A walkthrough image and the program that runs in its place."""

    repository: str  # as the walkthrough writes it, without a tag
    tag: str  # the tag it is published under
    command: str  # what runs when the workload gives no command (its entrypoint)
    note: str  # said in the workload's events

    @property
    def image(self) -> str:
        return f"{self.repository}:{self.tag}"


STAND_INS: tuple[StandIn, ...] = (
    StandIn(
        "kubeflow/pytorch-dist-mnist",
        DEFAULT_TAG,
        "python -m ringleader.examples.digits",
        "PyTorch DDP MNIST stand-in: the digits CNN (offline data)",
    ),
    StandIn(
        "gcr.io/run-ai-demo/quickstart-distributed",
        DEFAULT_TAG,
        "python -m ringleader.examples.digits",
        "Horovod quickstart stand-in: the digits CNN under mpirun",
    ),
)
_BY_REPOSITORY = {s.repository: s for s in STAND_INS}


def split_reference(image: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference, Docker Hub's prefix removed.

    ``gcr.io:443/a/b:v1@sha256:...`` -> (``gcr.io:443/a/b``, ``v1``, ``sha256:...``):
    a tag is a ``:`` after the last ``/``, so a registry's port is not one.
    """
    reference, _, digest = image.partition("@")
    slash = reference.rfind("/")
    colon = reference.rfind(":")
    repository, tag = reference, None
    if colon > slash:
        repository, tag = reference[:colon], reference[colon + 1 :]
    for prefix in DOCKER_HUB:
        if repository.startswith(prefix):
            repository = repository.removeprefix(prefix).removeprefix("library/")
            break
    return repository, tag, digest or None


def stand_in_for(image: str) -> StandIn | None:
    """The stand-in ``image`` names (with or without its tag), else None."""
    repository, tag, digest = split_reference(image)
    stand_in = _BY_REPOSITORY.get(repository)
    if stand_in is None or digest is not None or tag not in (None, stand_in.tag):
        return None
    return stand_in


def resolve_image(image: str | None, *, runtime: dict[str, str] | None) -> StandIn | None:
    """The stand-in to run for ``image``: None when there is no image or it runs in a
    container here (``runs_in_container``); InvalidSpec naming ``spec.image`` when it is
    no image reference, or cannot run here at all."""
    if not image:
        return None
    if problem := bad_reference(image):
        raise InvalidSpec(f"{image!r} is not an image reference: {problem}", "spec.image")
    if runs_in_container(image, runtime):
        return None
    stand_in = stand_in_for(image)
    if stand_in is None:
        raise InvalidSpec(
            f"image {image!r} cannot run here: this node has no container runtime. Leave the image "
            "out to run the command in the server's Python environment, or use one of: "
            + ", ".join(f"{s.repository}[:{s.tag}]" for s in STAND_INS),
            "spec.image",
        )
    return stand_in


def runs_in_container(image: str | None, runtime: dict[str, str] | None) -> bool:
    """Pods of ``image`` run in it: this machine has a container runtime, and the image
    is not a walkthrough image with a stand-in that is missing here (those cannot be
    pulled offline: the stand-in runs instead, and an event says so)."""
    if not image or runtime is None:
        return False
    if stand_in_for(image) is None:
        return True
    return image_present(runtime["path"], image)

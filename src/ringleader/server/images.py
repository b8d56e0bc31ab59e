"""Container images on a node without a container runtime.

ringleader's local backend runs pods as processes in the server's own
Python environment; it cannot pull or run an image.  Rather than silently
ignoring ``-i IMAGE``, a workload naming an image is rejected unless the
image is one of the walkthrough images below, for which ringleader ships an
equivalent program and says so in the workload's events.  This lets the
Run:ai walkthroughs (seeds 001 and 002) run as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringleader.errors import InvalidSpec


@dataclass(frozen=True)
class StandIn:
    image: str
    command: str  # what runs when the workload gives no command
    note: str


STAND_INS = {
    s.image: s
    for s in (
        StandIn(
            "kubeflow/pytorch-dist-mnist:latest",
            "python -m ringleader.examples.digits",
            "PyTorch DDP MNIST stand-in: the digits CNN (offline data)",
        ),
        StandIn(
            "gcr.io/run-ai-demo/quickstart-distributed",
            "python -m ringleader.examples.digits",
            "Horovod quickstart stand-in: the digits CNN under mpirun",
        ),
        StandIn(
            "gcr.io/run-ai-demo/quickstart-distributed:latest",
            "python -m ringleader.examples.digits",
            "Horovod quickstart stand-in: the digits CNN under mpirun",
        ),
    )
}


def resolve_image(image: str | None, *, container_runtime: bool) -> StandIn | None:
    """The stand-in to run for ``image``, None when no image; InvalidSpec when impossible."""
    if not image or container_runtime:
        return None
    stand_in = STAND_INS.get(image)
    if stand_in is None:
        raise InvalidSpec(
            f"image {image!r} cannot run here: this node has no container runtime. Leave the image "
            "out to run the command in the server's Python environment, or use one of: "
            + ", ".join(sorted(STAND_INS)),
            "spec.image",
        )
    return stand_in

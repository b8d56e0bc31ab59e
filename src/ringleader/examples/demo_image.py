"""``make demo-image``: the demo's workload in ringleader's PyTorch CPU image.

Why: a workload's image is its software environment (issue 24), and the demo is
where a newcomer sees what ringleader does.  With ``--image`` the demo makes the
image docs/images.md's commands make, when podman's store lacks it, typing them as a
user would (``ringleader image base``, then ``ringleader image build -f
examples/images/pytorch-cpu/Containerfile -t IMAGE .`` from the repository's
root), and submits the digits workload with ``-i IMAGE``: every rank then runs
the image's Python, torch and ringleader, not this machine's.

Rootful podman (the server's runtime) needs root; the build needs the repository
(its ``src`` goes into the image).  Each missing piece is said with its fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from ringleader.cluster.images import BASE_IMAGE

CONTAINERFILE = Path("examples/images/pytorch-cpu/Containerfile")


def repository_root() -> Path | None:
    """The checkout this ringleader runs from (its Containerfile and ``src``), if any."""
    here = Path(__file__).resolve()
    for folder in here.parents:
        if (folder / CONTAINERFILE).is_file() and (folder / "pyproject.toml").is_file():
            return folder
    return None


def ensure_image(
    image: str,
    ringleader: list[str],
    env: dict[str, str],
    shown: Callable[[list[str]], str],
) -> str:
    """Make ``image`` here when podman lacks it (the base first); "" or why not."""
    if os.geteuid() != 0:
        return "the demo in an image needs root (rootful podman): sudo make demo-image"
    podman = shutil.which("podman")
    if podman is None:
        return "podman is missing: make setup installs it (apt install podman runc)"
    if _exists(podman, image):
        print(f"image {image} is here (podman images)", flush=True)
        return ""
    root = repository_root()
    if root is None:
        return (
            f"image {image} is not here and this ringleader is not a checkout to build it "
            f"from: build it as docs/images.md says, or name one with --image IMAGE"
        )
    steps = []
    if not _exists(podman, BASE_IMAGE):
        steps.append([*ringleader, "image", "base"])
    steps.append([*ringleader, "image", "build", "-f", str(CONTAINERFILE), "-t", image, "."])
    for step in steps:
        print(f"$ {shown(step)}", flush=True)
        if subprocess.run(step, env=env, cwd=root, check=False).returncode != 0:
            return f"making the image failed at: {shown(step)}"
    return ""


def _exists(podman: str, image: str) -> bool:
    done = subprocess.run(
        [podman, "image", "exists", "--", image], capture_output=True, timeout=60, check=False
    )
    return done.returncode == 0

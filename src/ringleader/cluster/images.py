"""Images built here, offline from public registries: a Debian base made from Debian's
packages, and ``podman build`` on top of it with pip from the package index.

Why: a cluster like ours reaches Debian's mirror and PyPI but no public image
registry, so ``FROM docker.io/...`` cannot work.  ``image base`` makes the base
from Debian's packages (``mmdebstrap``, then ``podman import``); ``image build``
wraps ``podman build`` so that a ``RUN pip install ...`` works as it does on
this host:

- ``--network host``: the build reaches what the host reaches (the index, a proxy);
- the host's pip configuration as pip itself merges it (files and ``PIP_*``
  variables: ``pip config list``), written as the build's ``/etc/pip.conf``;
  the host's trust and what that configuration names, read-only at the same
  paths: ``/etc/xdg/pip``, the CA bundle in ``/etc/ssl/certs`` (a proxy that
  re-signs TLS is trusted as on the host), the local directories of
  ``find-links`` and ``file://`` indexes;
- a pip cache kept between builds (``HOME/cache/pip``), mounted for ``RUN`` steps
  only, so no wheel is downloaded twice and none ends up in the image.

Nothing is baked in that the host lends: the mounts are not layers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ringleader.errors import RingleaderError

BASE_IMAGE = "localhost/ringleader/debian-python:bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "procps")
MIRROR = "http://deb.debian.org/debian"
#: Where the host's pip reads its configuration and trust (Debian's places).
PIP_PLACES = ("/etc/xdg/pip", "/etc/ssl/certs")


def require_tool(name: str, package: str) -> str:
    """``name``'s path here, or an error naming the Debian package that has it."""
    found = shutil.which(name)
    if found is None:
        raise RingleaderError(f"no {name} here: install Debian's {package} (make setup does)")
    return found


def make_base(
    tag: str = BASE_IMAGE,
    *,
    suite: str = "bookworm",
    mirror: str = MIRROR,
    include: tuple[str, ...] = (),
    echo: Callable[[str], None] = print,
) -> None:
    """Make ``tag`` from Debian's packages: a minimal ``suite`` with ``BASE_PACKAGES``
    and ``include``, its default command bash.  RingleaderError saying what failed."""
    mmdebstrap = require_tool("mmdebstrap", "mmdebstrap")
    podman = require_tool("podman", "podman")
    packages = ",".join(dict.fromkeys((*BASE_PACKAGES, *include)))
    with tempfile.TemporaryDirectory(prefix="rl-base-") as work:
        tar = os.path.join(work, "rootfs.tar")
        echo(f"debootstrapping {suite} with {packages} from {mirror} ...")
        started = time.monotonic()
        made = subprocess.run(
            [mmdebstrap, "--variant=minbase", f"--include={packages}", suite, tar, mirror],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if made.returncode != 0:
            last = "\n".join(made.stderr.strip().splitlines()[-5:])
            raise RingleaderError(f"mmdebstrap failed (exit {made.returncode}):\n{last}")
        echo(f"root file system made in {time.monotonic() - started:.0f} s; importing as {tag}")
        imported = subprocess.run(
            [podman, "import", "--change", 'CMD ["/bin/bash"]', tar, tag],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if imported.returncode != 0:
            raise RingleaderError(f"podman import failed: {imported.stderr.strip()[-500:]}")


def pip_config() -> str:
    """What ``pip config list`` prints here: every setting, from files and ``PIP_*``."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True, text=True, timeout=60, check=False,
        ).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return ""


def pip_conf(config: str) -> str:
    """``config`` (``pip config list``'s lines, ``where.key='value'``) as one pip.conf:
    a variable's setting (``:env:.key``) goes to ``[global]`` and wins over a file's,
    as pip applies them."""
    sections: dict[str, dict[str, str]] = {}
    lines = config.splitlines()
    for line in sorted(lines, key=lambda text: not text.startswith(":env:.")):  # env first
        where, sep, value = line.partition("=")
        origin, dot, key = where.rpartition(".")
        if not sep or not dot or not key:
            continue
        section = sections.setdefault("global" if origin in (":env:", "") else origin, {})
        section.setdefault(key, value.strip().strip("'\""))
    return "".join(
        f"[{name}]\n" + "".join(f"{key} = {value}\n" for key, value in keys.items())
        for name, keys in sections.items()
    )


def host_pip_mounts(config: str) -> list[str]:
    """The host's trust and the local package directories ``config`` (``pip config
    list``'s lines) names, as ``SRC:SRC:ro`` volume specs (those that exist here)."""
    places = list(PIP_PLACES)
    for line in config.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        if name in ("find-links", "extra-index-url", "index-url", "cert"):
            for word in value.strip().strip("'\"").split():
                path = word.removeprefix("file://").rstrip("/")
                if not path.startswith("/"):
                    continue
                if name.endswith("index-url"):  # a local index links to files beside it
                    path = os.path.dirname(path)
                places.append(path if os.path.isdir(path) else os.path.dirname(path))
    kept = [p for p in dict.fromkeys(places) if os.path.exists(p) and ":" not in p]
    return [f"{p}:{p}:ro" for p in kept]


def build_argv(
    podman: str,
    containerfile: str,
    tag: str,
    context: str,
    cache: str,
    mounts: list[str],
    args: list[str] = [],  # noqa: B006 (read only)
) -> list[str]:
    """``podman build`` as ``image build`` runs it (pure: golden-tested)."""
    out = [podman, "build", "--network", "host", "-f", containerfile, "-t", tag]
    for pair in args:
        out += ["--build-arg", pair]
    for spec in [*mounts, f"{cache}:/root/.cache/pip"]:
        out += ["--volume", spec]
    return [*out, context]


def build(
    containerfile: str,
    tag: str,
    context: str,
    cache: Path,
    args: list[str],
    echo: Callable[[str], None] = print,
) -> float:
    """Build ``tag``, podman's progress on this terminal; the seconds it took."""
    podman = require_tool("podman", "podman")
    if not os.path.isfile(containerfile):
        raise RingleaderError(f"no Containerfile at {containerfile}")
    if not os.path.isdir(context):
        raise RingleaderError(f"the build context {context} is not a directory")
    cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    config = pip_config()
    echo(f"building {tag} from {containerfile} (context {context}; pip as on this host)")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rl-build-") as work:
        conf = os.path.join(work, "pip.conf")
        with open(conf, "w") as out:
            out.write(pip_conf(config))
        os.chmod(work, 0o755)
        os.chmod(conf, 0o644)
        mounts = [f"{conf}:/etc/pip.conf:ro", *host_pip_mounts(config)]
        argv = build_argv(podman, containerfile, tag, context, str(cache), mounts, args)
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        raise RingleaderError(f"podman build of {tag} failed (exit {done.returncode}; above)")
    return time.monotonic() - started

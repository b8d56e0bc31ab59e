"""Which container runtime a host runs image pods with: podman or docker.

Why its own module: the server (at start, for its nodes' capabilities), each host's
agent (before its ranks) and the pinning of an image all ask it, and podman's and
docker's CLIs differ in a few words the callers need to know (``is_docker``).
podman comes first (Debian's, daemonless); a host with both runs docker where
``RUNTIME_VAR`` says so (``server``/``launch --container-runtime`` set it).

Standard library only: the agent imports it.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time

RUNTIMES = ("podman", "docker")
#: The runtime a host prefers where it has both.
RUNTIME_VAR = "RINGLEADER_CONTAINER_RUNTIME"
#: ``detect``: how often a runtime that is there is asked, how long each answer may
#: take, and the pause before the next ask (growing).
DETECT_TRIES, DETECT_TIMEOUT_S, DETECT_PAUSE_S = 3, 30.0, 2.0
#: Where a runtime's CLI finds its daemon, its credentials and TLS: the server's
#: (``DOCKER_HOST=unix:///run/private/docker.sock``) reach its supervisors and agents,
#: which run the CLI, but not a pod (``agent_only``/``drop_agent_only``).
RUNTIME_ENV = frozenset(
    {
        "DOCKER_HOST",
        "DOCKER_CONTEXT",
        "DOCKER_CONFIG",
        "DOCKER_CERT_PATH",
        "DOCKER_TLS_VERIFY",
        "CONTAINER_HOST",
        "CONTAINER_SSHKEY",
    }
)
#: The names of ``RUNTIME_ENV`` a server's supervisor passed on: an agent's, not a rank's.
AGENT_ONLY_VAR = "RINGLEADER_AGENT_ONLY_ENV"


def detect(tries: int = DETECT_TRIES) -> dict[str, str] | None:
    """This host's container runtime: ``{"name", "path", "version"}``, or None.  podman
    first (Debian's, daemonless), then docker, unless ``RUNTIME_VAR`` names one
    (``runtime_names``); one whose ``version`` fails is none.

    A runtime that is there but does not answer (a loaded host, a store busy with a
    build) is asked again, ``tries`` times in all: a server decides this once, at start,
    and one slow answer would leave it refusing every image until restarted."""
    import shutil  # here: the agent imports this module, and starts without shutil

    for name in runtime_names():
        path = shutil.which(name)
        if path is None:
            continue
        for attempt in range(tries):
            if attempt:
                time.sleep(DETECT_PAUSE_S * attempt)
            try:
                done = subprocess.run(
                    [path, "version", "--format", "{{.Client.Version}}"],
                    capture_output=True,
                    text=True,
                    timeout=DETECT_TIMEOUT_S,
                    check=False,
                )
            except OSError:
                break  # not runnable: no retry helps
            except subprocess.TimeoutExpired:
                continue
            if done.returncode == 0 and done.stdout.strip():
                return {"name": name, "path": path, "version": done.stdout.strip()}
    return None


def runtime_names() -> tuple[str, ...]:
    """``RUNTIMES`` in this host's order of preference: the one ``RUNTIME_VAR`` names
    first (a host with both that should run docker), then the rest."""
    preferred = os.environ.get(RUNTIME_VAR, "")
    if preferred not in RUNTIMES:
        return RUNTIMES
    return (preferred, *(name for name in RUNTIMES if name != preferred))


def is_docker(runtime: str) -> bool:
    """``runtime`` (a name or a path) is docker, whose CLI differs from podman's in a few
    words: an entrypoint is one string, ``rm`` has no ``--time``."""
    return os.path.basename(runtime) == "docker"


@functools.cache
def detected() -> dict[str, str] | None:
    """``detect()`` once per process (a server asks for every backend it makes)."""
    return detect()


def agent_only(environ: dict[str, str] | os._Environ[str]) -> None:
    """Mark the ``RUNTIME_ENV`` variables in ``environ`` (a server's supervisor's, which
    its agents inherit) as the agents' own: ``drop_agent_only`` keeps them from ranks."""
    names = sorted(name for name in RUNTIME_ENV if name in environ)
    if names:
        environ[AGENT_ONLY_VAR] = ",".join(names)
    else:
        environ.pop(AGENT_ONLY_VAR, None)


def drop_agent_only(env: dict[str, str]) -> None:
    """Take from a rank's ``env`` (a copy of its agent's) what ``agent_only`` marked:
    a pod gets no way to the server's container daemon or its registry credentials.
    A launch without a server marks nothing: a user's own ranks keep their shell's."""
    for name in env.pop(AGENT_ONLY_VAR, "").split(","):
        if name in RUNTIME_ENV:
            env.pop(name, None)

"""A rank in an OCI container: the image is what runs, the gang stays ringleader's.

Why: a workload's image is its software environment, the same on every node and
readable by the account that runs it (issue 24).  The agent still starts, watches
and stops every rank; for an image it starts the rank as ``podman run`` (or
``docker run``) in the foreground instead of as a process, so output, exit codes,
signals and the rank's cgroup stay as for a process pod:

- ``--network host --ipc host``: ranks reach each other and the master as
  process ranks do (NCCL and gloo need no port mapping);
- the rank's environment: what ringleader, the framework and the spec set (the
  host's own ``PATH``, ``PYTHONPATH`` and ``LD_LIBRARY_PATH`` stay out: the
  image's are its own), passed by name (``-e NAME``, the value from podman's
  environment) so no value is on a command line;
- ``--user UID:GID`` of the pod's account (none: the image's user), with no
  capability and ``no-new-privileges`` (a setuid program gives nothing);
- the pod's GPUs (its ``CUDA_VISIBLE_DEVICES``) as CDI devices, renumbered
  from 0 inside (``gpu_flags``: the GPU machines have no container runtime, so
  these arguments are golden-tested);
- ``--cgroup-parent``: the pod's cgroup, so the container (and its conmon) are
  child cgroups of it: its limits hold and a kill of the run's cgroup ends them.
  podman itself stays in the agent's cgroup, not the pod's: cgroup v2 allows no
  process in a cgroup whose children have controllers;
- mounts: the working directory, the agent's run dir (error files) and the
  workload's own directory, each at its own path; those a tenant names are
  mounted as the tenant opened them (``container_mounts``);
- the container's name and labels carry the job and rank, so a stop (and the
  server's sweep) removes every container of the job: ``remove_job``;
- ``--init`` where the runtime has one (podman's catatonit): a rank's command is
  not the container's PID 1, which ignores any signal it has no handler for, so a
  stop's SIGTERM reaches it as it reaches a process rank;
- an interactive pod runs ``keepalive.IMAGE_KEEPALIVE`` (a POSIX shell, as any image has):
  its command, or the image's own entrypoint and arguments, then it holds the
  pod up for ``exec``/``bash`` (``podman exec`` into the container) until stopped.

Standard library only: the agent imports this module (lazily, for image pods).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from typing import Any

from ringleader.launch import container_mounts, image_pin, image_pull
from ringleader.launch.container_cgroups import cgroup_parent, v1_cpu_flags
from ringleader.launch.container_runtime import (
    AGENT_ONLY_VAR,
    RUNTIME_ENV,
    RUNTIMES,
    is_docker,
    runtime_names,
)
from ringleader.launch.keepalive import image_keepalive_argv
from ringleader.launch.rank_process import CPU_AFFINITY
from ringleader.launch.registry_pull import registry_flags

LABEL = "ringleader.job"
GPUS_VAR = "CUDA_VISIBLE_DEVICES"
JOIN_VAR = "RINGLEADER_CGROUP"  # server/backends/local/cgroups.JOIN_VAR (not imported here)
#: The host's own software paths: an image brings its own.
#: And the runtime's own settings (its daemon, credentials): the host's, never a pod's.
HOST_ONLY = frozenset(
    {"PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "PYTHONHOME", AGENT_ONLY_VAR}
    | RUNTIME_ENV
)
#: An image reference: [registry[:port]/]path[:tag][@digest], lower-case path parts; a
#: first part is a registry only with a dot, a port or as localhost (Docker's rule).
REFERENCE = re.compile(
    r"^(?:(?:[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)+(?::[0-9]+)?|[a-zA-Z0-9-]+:[0-9]+|localhost)/)?"
    r"[a-z0-9]+(?:[._-]+[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[a-f0-9]{64})?$"
)
#: podman's init (Debian's catatonit), where ``--init`` finds it.
PODMAN_INIT = "/usr/libexec/podman/catatonit"
#: How long a host's agent waits for a pull before its gang fails (within the
#: supervisor's wait for every agent to be ready, agent_startup.READY_TIMEOUT_S).
PULL_TIMEOUT_S = 45.0


def bad_reference(image: str) -> str:
    """Why ``image`` is not an image reference (no option, no shell syntax); "" if it is."""
    if not image:
        return "empty"
    if image.startswith("-"):
        return "it starts with '-' (an option, not an image)"
    if len(image) > 255 or not REFERENCE.match(image):
        return (
            "not [registry/]name[:tag][@sha256:digest] (a lower-case name, no spaces or "
            "shell syntax)"
        )
    return ""


def ready_image(
    container: dict[str, Any], scratch: str, progress: image_pull.Progress | None = None
) -> tuple[dict[str, Any], str]:
    """On this host, before any rank: ``container`` with its runtime's path here, and
    the image pulled as its policy says (``pull``: Always, IfNotPresent (default),
    Never); "" or the reason no rank can start (the registry's own words, a pull that
    took longer than its ``pull_timeout``, no runtime on this host).  An interactive
    pod with no command of its own gets the image's default (``image_default``),
    read here once for every rank of the host.  ``scratch``: the agent's private
    run directory (a registry password handed to it is kept there for the pull).
    ``progress`` hears how a pull goes (image_pull), for the workload's events."""
    here, problem = _pulled(container, scratch, progress)
    if not problem and here.get("interactive") and not here.get("entrypoint"):
        here["image_default"] = image_config(str(here["runtime"]), str(here["image"]))
    return here, problem


def _pulled(
    container: dict[str, Any], scratch: str, progress: image_pull.Progress | None
) -> tuple[dict[str, Any], str]:
    """``ready_image`` but the image's default."""
    name = str(container.get("runtime") or runtime_names()[0])
    # The head's choice, else this host's own (an SSH node may have docker only).
    runtime = shutil.which(name) or next(filter(None, map(shutil.which, runtime_names())), None)
    image = str(container["image"])
    if runtime is None:
        return container, f"this host has no {' or '.join(RUNTIMES)} to run image {image}"
    # A registry password handed to this host is for the pull only (registry_pull).
    kept = {k: v for k, v in container.items() if k != "registry"}
    here = {**kept, "runtime": runtime, "init": has_init(runtime)}
    policy = str(container.get("pull") or "IfNotPresent")
    if policy != "Always" and image_present(runtime, image):
        return here, image_pin.drift(runtime, container)
    if policy == "Never":
        return here, f"image {image} is not on this host and its pull policy is Never"
    limit = float(container.get("pull_timeout") or PULL_TIMEOUT_S)
    with registry_flags(container, image, scratch, is_docker(runtime)) as (flags, refused):
        if refused:
            return here, refused
        try:
            return here, image_pull.pull(runtime, image, flags, limit, progress)
        except OSError as exc:
            return here, f"cannot run {runtime}: {exc}"


def has_init(runtime: str) -> bool:
    """``--init`` works with this runtime here: docker brings its own; podman runs
    catatonit from its configured path (Debian's package puts it there)."""
    if os.path.basename(runtime) != "podman":
        return True
    return os.path.exists(PODMAN_INIT)


def image_config(runtime: str, image: str) -> tuple[list[str], list[str]]:
    """The image's own entrypoint and default arguments (its ``Cmd``): what
    ``podman run IMAGE`` runs; empty where it says none or cannot be read."""
    try:
        config = json.loads(image_pin.inspect_image(runtime, image, "{{json .Config}}") or "{}")
    except ValueError:
        config = {}
    if not isinstance(config, dict):
        config = {}
    entry, cmd = config.get("Entrypoint") or [], config.get("Cmd") or []
    return [str(word) for word in entry], [str(word) for word in cmd]


def image_present(runtime: str, image: str) -> bool:
    """The image is in this host's store (``image inspect``: podman's ``image exists``
    is not docker's)."""
    return bool(image_pin.image_id(runtime, image))


def container_name(job_id: str, rank: int) -> str:
    safe = re.sub(r"[^a-zA-Z0-9_.-]", "_", job_id)
    return f"{safe}-rank{rank}" if rank >= 0 else f"{safe}-launcher"


def run_argv(
    container: dict[str, object],
    *,
    name: str,
    job_id: str,
    rank: int,
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    account: tuple[int, int] | None,
    mounts: list[tuple[str, str]] | list[tuple[str, str, str]],
    cgroup: str,
    limits: list[str] | None = None,
) -> list[str]:
    """``podman run`` of ``argv`` in the image for one rank (pure: golden-tested).
    ``mounts``: (source on the host, path inside[, options: "ro"]); ``cgroup``:
    ``--cgroup-parent``; ``limits``: podman's own (``v1_cpu_flags``)."""
    runtime = str(container["runtime"])
    out = [runtime, "run", "--rm", "--name", name, "--label", f"{LABEL}={job_id}"]
    out += ["--label", f"ringleader.rank={rank}", "--network", "host", "--ipc", "host"]
    out += ["--pull", "never"]  # ready_image pulled it, as its policy says, before any rank
    # No setuid gain (a tenant's volume over /etc cannot make su give root), and a
    # tenant's account holds no capability in the container either.
    out += ["--security-opt", "no-new-privileges"]
    if account is not None:
        out += ["--cap-drop", "all"]
    if container.get("init"):
        out += ["--init"]
    if account is not None:
        out += ["--user", f"{account[0]}:{account[1]}"]
    if cgroup:
        out += ["--cgroup-parent", cgroup]
    out += limits or []
    out += gpu_flags(runtime, env.get(GPUS_VAR))
    if env.get(CPU_AFFINITY):  # the cores the pod is pinned to, as a process pod's rank
        out += ["--cpuset-cpus", env[CPU_AFFINITY]]
    if container.get("shm_size"):
        out += ["--shm-size", str(container["shm_size"])]
    for source, inside, *options in mounts:
        out += ["--volume", ":".join([source, inside, *(o for o in options if o)])]
    out += ["--workdir", cwd]
    for key in sorted(env):
        if key not in HOST_ONLY:
            out += ["--env", key]
    if (container.get("entrypoint") or container.get("interactive")) and argv:
        # podman reads a JSON list (a plain word could be split); docker takes one string.
        out += ["--entrypoint", argv[0] if is_docker(runtime) else json.dumps(argv[:1])]
        argv = argv[1:]
    return [*out, "--", str(container["image"]), *argv]


def gpu_flags(runtime: str, visible: str | None) -> list[str]:
    """The pod's GPUs (its ``CUDA_VISIBLE_DEVICES``: nvidia-smi's indices) as the
    runtime's devices: CDI's ``nvidia.com/gpu=N`` for podman (the NVIDIA Container
    Toolkit's names), ``--gpus device=N,M`` for docker; none for a pod without."""
    indices = [i for i in (visible or "").split(",") if i.strip().isdigit()]
    if not indices:
        return []
    if is_docker(runtime):
        return ["--gpus", f"device={','.join(indices)}"]
    return [arg for i in indices for arg in ("--device", f"nvidia.com/gpu={i}")]


def gpus_inside(visible: str | None) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` inside the container: its devices are all it sees,
    numbered from 0 (None: leave the variable as it is)."""
    indices = [i for i in (visible or "").split(",") if i.strip().isdigit()]
    return ",".join(str(n) for n in range(len(indices))) if indices else None


def _joins(argv: list[str]) -> bool:
    """``argv`` starts with the join shim (server/backends/local/cgroups.join_argv)."""
    return len(argv) >= 4 and argv[:2] == ["/bin/sh", "-c"] and argv[3] == "ringleader-join"


def command_of(argv: list[str]) -> list[str]:
    """The rank's own command: ``argv`` without the join shim in front."""
    return argv[4:] if _joins(argv) else argv


class RankRun:
    """Where one rank of a job runs on this host: the agent's run dir, and a directory
    of root's alone for the mounts staged for it."""

    __slots__ = ("again", "job_id", "rank", "rundir", "staged")

    def __init__(self, job_id: str, rank: int, rundir: str, staged: str, again: int = 0) -> None:
        self.job_id, self.rank, self.rundir, self.staged = job_id, rank, rundir, staged
        # The pod's how-many-th container beside its first (a second mpirun by hand in
        # an interactive MPI gang): a name of its own, ``...-rankN-K``.
        self.again = again

    @property
    def name(self) -> str:
        first = container_name(self.job_id, self.rank)
        return f"{first}-{self.again}" if self.again else first


def popen_rank(
    container: dict[str, Any],
    run: RankRun,
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    account: tuple[int, int] | None,
) -> subprocess.Popen[bytes]:
    """Start one rank as ``podman run`` of the image: the runtime as root, in the
    agent's cgroup, the container as ``account`` in the pod's cgroup, the directories
    the tenant names mounted as the account opened them (OSError when it cannot)."""
    # podman stays in the agent's cgroup: the pod's gets the container and conmon as
    # children (cgroup v2 allows no process beside child cgroups that have controllers).
    join = env.pop(JOIN_VAR, "")
    podman_env = dict(env)
    # The runtime's own settings (its daemon, credentials): the agent's, kept from ranks.
    podman_env |= {name: os.environ[name] for name in RUNTIME_ENV if name in os.environ}
    inside = gpus_inside(env.get(GPUS_VAR))
    if inside is not None:  # what --env passes by name: the container's own numbering
        podman_env[GPUS_VAR] = inside
    tenant_paths = [cwd, *container.get("mounts", [])]
    python = container.get("python")
    mounts: list[tuple[str, str, str]] = [(run.rundir, run.rundir, "")]
    mounts += [(*m, "") for m in container_mounts.stage(tenant_paths, account, run.staged, python)]
    volumes = container.get("volumes") or []
    mounts += container_mounts.stage_volumes(
        volumes, account, run.staged, python, container.get("allowed") or []
    )
    command = command_of(argv)
    if container.get("interactive"):
        command = image_keepalive_argv(container.get("image_default"), command)
    podman = run_argv(
        container,
        name=run.name,
        job_id=run.job_id,
        rank=run.rank,
        argv=command,
        env=env,
        cwd=cwd,
        account=account,
        mounts=mounts,
        cgroup=cgroup_parent(join),
        limits=v1_cpu_flags(join),
    )
    return subprocess.Popen(
        podman,
        cwd="/",
        env=podman_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def remove_job(runtime: str, job_id: str, timeout_s: float = 60) -> list[str]:
    """Force-remove every container of ``job_id`` (stopped or not); the IDs found.

    Checked, not assumed: after each ``rm`` the job's containers are listed again and
    what is left is removed again, until none is or ``timeout_s`` has passed.  One
    ``rm`` is not always enough: a container whose ``podman stop`` client was killed
    with the run's cgroup (left "Stopping"), or that conmon's cleanup holds at that
    moment, can outlive it, and nothing removes it later (its run has ended).
    """
    deadline = time.monotonic() + timeout_s
    found: list[str] = []
    pause_s = 0.1
    while (ids := _job_containers(runtime, job_id, deadline)) and time.monotonic() < deadline:
        found += [i for i in ids if i not in found]
        # podman's ``rm --force`` waits the container's stop timeout first; docker's kills.
        now = [] if is_docker(runtime) else ["--time", "0"]
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                [runtime, "rm", "--force", *now, *ids],
                capture_output=True,
                timeout=max(deadline - time.monotonic(), 1),
                check=False,
            )
        if not _job_containers(runtime, job_id, deadline):
            break
        time.sleep(min(pause_s, max(deadline - time.monotonic(), 0)))
        pause_s = min(pause_s * 2, 2.0)
    return found


def _job_containers(runtime: str, job_id: str, deadline: float) -> list[str]:
    """The IDs of ``job_id``'s containers; none when the runtime cannot say."""
    try:
        listed = subprocess.run(
            [
                runtime,
                "ps",
                "--all",
                "--quiet",
                "--no-trunc",
                "--filter",
                f"label={LABEL}={job_id}",
            ],
            capture_output=True,
            text=True,
            timeout=max(deadline - time.monotonic(), 1),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return listed.stdout.split() if listed.returncode == 0 else []

"""Where ``ringleader exec``/``bash`` run in a local pod: its live process's
directory and environment, inside the pod's cgroup (limited and killed with it),
as the pod's account (through sudo when the server is not root).

Why a module: the session must be the pod's own (same account, same cgroup,
same variables), so finding it reads /proc, the launch file and the cgroup
tree; the backend only answers the server's call with it.

A pod in an image is its container: the session is ``podman exec`` into it, as
the container's user, in its directory, with its environment (the rank's), so
it runs the image's software, never the host's.

Which process is the pod's is a kernel fact, never its environment (which
any tenant can forge, naming another's job and rank): a member of the pod's
cgroup (MPI's launcher, mpirun, has none: the run's ``supervisor`` cgroup),
running as the pod's account, preferably the very process the agent
recorded spawning (``launch/spawned.py``, checked by its start time).  Only
then is its directory and environment taken.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from ringleader.errors import Conflict, NotFound, RingleaderError
from ringleader.launch import containers
from ringleader.launch.account import (
    HERE,
    MODULE,
    NOT_FOUND,
    pod_process,
    spawns_arg,
    sudo_argv,
)
from ringleader.launch.container_runtime import RUNTIME_ENV
from ringleader.launch.detached import LaunchFile, load_launch
from ringleader.launch.procs import start_ticks
from ringleader.launch.spawned import SPAWNED_FILE, recorded
from ringleader.server.backends.base import ExecTarget, RunAs
from ringleader.server.backends.local.cgroups import JOIN_VAR, SUPERVISOR, join_argv
from ringleader.server.backends.local.homes import through_sudo
from ringleader.server.backends.local.planning import (
    ENVIRONMENT,
    account_run_as,
    isolation_of,
    pods_from_launch,
)

if TYPE_CHECKING:
    from ringleader.server.backends.local import LocalBackend


def exec_target(backend: LocalBackend, handle: str, pod: str) -> ExecTarget:
    """The session's place for ``pod`` of the run at ``handle``; NotFound for an
    unknown run or pod, Conflict when the pod has no live process."""
    run_dir = Path(handle).resolve()
    launch = load_launch(run_dir)
    if launch is None:
        raise NotFound("workload run", handle)
    pods = {p.name: p for p in pods_from_launch(launch)}
    if pod not in pods:
        raise NotFound("pod", pod)
    run_id, rank = launch.spec.run_id, pods[pod].ranks[0]
    remote = backend.reach(launch, pods[pod])
    if launch.spec.container:
        return _in_container(backend.node, launch, pod, rank, remote)
    if remote:
        return _on_ssh_node(backend.node, launch, pod, rank, remote)
    run_as = account_run_as(launch)  # the session is the pod's account, as its ranks are
    if run_as is not None and run_as.sudo:  # only the account reads its /proc entries
        return _through_sudo(backend.node, launch, run_as, pod, rank, run_dir)
    rel = f"{run_id}/{pod}"
    hierarchy = backend.cgroups if isolation_of(launch) != ENVIRONMENT else None
    members = None
    if hierarchy is not None:  # mpirun's pod has no cgroup: it is the run's supervisor's
        members = hierarchy.pids(rel if hierarchy.exists(rel) else f"{run_id}/{SUPERVISOR}")
    found = pod_process(
        rank,
        uid=run_as.uid if run_as is not None else os.geteuid(),
        spawns=recorded(str(run_dir / SPAWNED_FILE)),
        members=members,
    )
    if found is None:
        raise Conflict(no_process(pod))
    pid, env = found
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        cwd = launch.spec.cwd
    started = start_ticks(pid)
    view = (pid, started) if run_as is not None and started is not None else None
    if hierarchy is not None and hierarchy.exists(rel):  # the pod's: limited, killed
        join = tuple(hierarchy.procs_files(rel))
        if view is not None:  # root moves the session there (podns) before it drops
            return ExecTarget(backend.node, cwd, env, run_as=run_as, view=view, join=join)
        env = {**env, JOIN_VAR: " ".join(join)}
        return ExecTarget(backend.node, cwd, env, tuple(join_argv([])), run_as=run_as)
    return ExecTarget(node=backend.node, cwd=cwd, env=env, run_as=run_as, view=view)


def _through_sudo(
    node: str, launch: LaunchFile, run_as: RunAs, pod: str, rank: int, run_dir: Path
) -> ExecTarget:
    """The session as the account through sudo: ``launch/account.py exec`` finds the
    pod's process (from the agent's spawn record, read here: the run directory is the
    server's), enters its directory and takes its environment, as the account."""
    python, run_id = launch.spec.python, launch.spec.run_id
    spawns = spawns_arg(recorded(str(run_dir / SPAWNED_FILE)))
    found = through_sudo(run_as, python, "exec", "--check", run_id, str(rank), spawns)
    if found.returncode == NOT_FOUND:
        raise Conflict(no_process(pod))
    if found.returncode != 0:
        raise RingleaderError(
            f"cannot exec as {run_as.name}: {found.stderr.strip() or found.returncode}"
        )
    prefix = sudo_argv(run_as.sudo, run_as.name, python, "exec", run_id, str(rank), spawns, "--")
    return ExecTarget(node=node, cwd="/", env={}, prefix=tuple(prefix))


def _on_ssh_node(
    node: str, launch: LaunchFile, pod: str, rank: int, remote: tuple[str, ...]
) -> ExecTarget:
    """The session on the pod's SSH node, as the user the server logs in as there (who
    its agent and ranks run as): ``launch/account.py exec`` finds the pod's process by
    the spawn record that node's agent keeps (``here``), enters its directory and
    takes its environment.  Its processes carry a marker, so what the session left
    there when its client went is ended (``ExecTarget.marked``, in the node's host
    pid namespace: ``self``)."""
    python, run_id = launch.spec.python, launch.spec.run_id
    check = [python, "-I", "-m", MODULE, "exec", "--check", run_id, str(rank), HERE]
    try:
        found = subprocess.run(
            [*remote, shlex.join(check)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RingleaderError(f"cannot reach pod {pod}'s node: {exc}") from None
    if found.returncode == NOT_FOUND:
        raise Conflict(no_process(pod))
    if found.returncode != 0:
        why = found.stderr.strip()[-300:] or f"exit code {found.returncode}"
        raise RingleaderError(f"cannot exec into pod {pod} on its node: {why}")
    marker = f"{SESSION_VAR}={secrets.token_hex(8)}"
    prefix = (python, "-I", "-m", MODULE, "exec", run_id, str(rank), HERE, "--", "env", marker)
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LANG": "C.UTF-8"}
    return ExecTarget(node, "/", env, prefix=prefix, remote=remote, remote_marker=marker)


#: What a session's processes in a container carry (ExecTarget.marked).
SESSION_VAR = "RINGLEADER_EXEC_SESSION"


def _in_container(
    node: str, launch: LaunchFile, pod: str, rank: int, remote: tuple[str, ...] = ()
) -> ExecTarget:
    """The session as ``podman exec`` into the pod's running container (root runs the
    runtime; the session is the container's user, the pod's account).  ``remote``: the
    ssh argv to the pod's SSH node, where its agent ran the container (and its runtime
    by name: that node's own)."""
    container = launch.spec.container
    named = str(container.get("runtime") or "podman")
    runtime = named if remote else shutil.which(named)
    if runtime is None:
        raise Conflict(f"pod {pod} runs in an image, and this host has no container runtime")
    name = containers.container_name(launch.spec.run_id, rank)
    ask = [runtime, "container", "inspect", "--format", "{{.State.Running}} {{.State.Pid}}", name]
    try:
        state = subprocess.run(
            [*remote, shlex.join(ask)] if remote else ask,
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RingleaderError(f"cannot ask {runtime} about pod {pod}: {exc}") from None
    if remote and state.returncode == 255:
        raise RingleaderError(f"cannot reach pod {pod}'s node: {state.stderr.strip()[-300:]}")
    running, _, first = state.stdout.strip().partition(" ")
    if running != "true" or not first.isdigit():
        raise Conflict(no_process(pod))
    marker = f"{SESSION_VAR}={secrets.token_hex(8)}"
    run_as = account_run_as(launch)
    user = ["--user", f"{run_as.uid}:{run_as.gid}"] if run_as is not None else []
    # Debian's bashrc puts ($debian_chroot) in front of the prompt: the pod's name.
    head = [runtime, "exec", "--interactive", *user, "--env", f"debian_chroot={pod}"]
    head += ["--env", marker]
    tail = ["--workdir", launch.spec.cwd, name]
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LANG": "C.UTF-8"}
    if not remote:  # the runtime's daemon (DOCKER_HOST ...) as the server reaches it
        env |= {key: os.environ[key] for key in RUNTIME_ENV if key in os.environ}
    return ExecTarget(
        node,
        "/",
        env,
        prefix=(*head, *tail),
        tty_prefix=(*head, "--tty", *tail),
        marked=(marker, int(first)),
        remote=remote,
    )


def no_process(pod: str) -> str:
    return (
        f"pod {pod} has no running process to exec into (its command has ended); "
        "submit with --interactive to keep pods up after their command"
    )

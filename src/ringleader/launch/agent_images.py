"""What a host's agent does for a run in an image (issue 24): make the image ready,
start a rank's container, give mpirun its way into the worker pods, and remove the
run's containers at the end.

Kept apart from ``agent.py`` so that a run without an image imports none of it
(the agent starts on the path of every launch: bench/launch.py's fixed cost).

Invariants:
- no rank starts until the image is on this host as its pull policy says, and the
  volumes the spec names are the account's to mount (``ready``);
- each container's mounts are staged in a directory of root's alone, fresh for it;
- ``close`` removes every container of the run on this host, whatever is left.
"""

from __future__ import annotations

import os
import threading
from subprocess import Popen
from typing import Any

from ringleader.launch import container_mounts, containers
from ringleader.launch.container_mounts import check_volumes
from ringleader.launch.image_pull import Progress
from ringleader.launch.rank_process import private_dir

#: Account ids as rank_process.run_as_ids gives them: (uid, gid), or None (the agent's).
Account = tuple[int, int] | None


def ready(
    spec: dict[str, Any], rundir: str, account: Account, progress: Progress
) -> tuple[dict[str, Any], str, str]:
    """The image ready on this host: (its container settings here, the stage that
    failed or "", why). Not a crash when it fails: no rank starts, and no restart
    would help."""
    container, problem = containers.ready_image(spec, rundir, progress)
    if problem:
        return container, "image", problem
    problem = check_volumes(container, account)
    return container, ("volume" if problem else ""), problem


def popen(
    container: dict[str, Any],
    job_id: str,
    rundir: str,
    rank: int,
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    account: Account,
    again: int = 0,
) -> Popen[bytes]:
    """A container of the image for ``rank``'s pod, its mounts staged in a directory
    of root's alone (``again``: the pod's how-many-th, see ``containers.RankRun``)."""
    staged = private_dir(rundir, f"mounts-rank{rank}-")
    run = containers.RankRun(job_id, rank, rundir, staged, again)
    return containers.popen_rank(container, run, argv, cwd, env, account)


def mpi_bridge(
    container: dict[str, Any],
    job_id: str,
    rundir: str,
    pods: dict[str, Any],
    cwd: str,
    node: int,
    account: Account,
    base_env: dict[str, str],
    send: Any,
) -> Any:
    """mpirun in the image reaches its worker pods through this agent (mpi_bridge):
    each starts as a container of the image with that pod's environment (node 0,
    mpirun's, listens; another node's starts its pods when node 0's asks)."""
    from ringleader.launch import mpi_bridge as bridges

    # The daemon's command replaces the image's entrypoint, and no keepalive holds it.
    worker = {**container, "interactive": False, "entrypoint": True}
    started, counting = dict[str, int](), threading.Lock()

    def start(pod: str, argv: list[str]) -> Popen[bytes]:
        spec = pods[pod]
        env = {**base_env, **spec["env"]}
        with counting:  # a later mpirun's container of the pod: a name of its own
            again = started[pod] = started.get(pod, -1) + 1
        rank = int(spec["rank"])
        return popen(worker, job_id, rundir, rank, argv, cwd, env, account, again)

    uid = account[0] if account is not None else os.geteuid()
    return bridges.Bridge(rundir, pods, uid, start, send, node=node, listen=node == 0)


def close(container: dict[str, Any], job_id: str, rundir: str | None) -> None:
    """Remove the run's containers on this host and the mounts staged for them."""
    containers.remove_job(str(container["runtime"]), job_id)
    if rundir is not None:
        container_mounts.unstage_all(rundir)

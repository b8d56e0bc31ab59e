"""Where ``exec``/``bash`` into a pod runs: the caller's token checked, the pod
picked, the backend asked for its target.

Blocking (the database, and /proc or SSH in the backend): the WebSocket route
runs it in a thread. The pod is a full name or its suffix (``worker-1``); by
default the master or launcher pod.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from sqlalchemy.orm import Session

from ringleader.errors import InvalidSpec, NotFound, RingleaderError, Unauthorized
from ringleader.server.auth import user_for_token
from ringleader.server.backends import BackendSet
from ringleader.server.backends.base import ExecTarget
from ringleader.server.services.roles import require_role
from ringleader.server.services.workloads import get


def pick_pod(names: list[str], heads: list[str], workload: str, pod: str | None) -> str:
    """The pod asked for (full name or suffix), or the master/launcher pod."""
    if pod is None:
        if not heads:
            raise NotFound("pod", f"{workload}-master-0")
        return heads[0]
    for candidate in (pod, f"{workload}-{pod}"):
        if candidate in names:
            return candidate
    raise InvalidSpec(f"no such pod in workload {workload!r}; pods: {sorted(names)}", "pod")


def exec_target(
    readers: Callable[[], AbstractContextManager[Session]],
    backends: BackendSet,
    authorization: str,
    workload_id: str,
    pod: str | None,
) -> ExecTarget:
    """Authorize the ``Authorization`` header's bearer and find where the command runs."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("missing bearer token; get one with `ringleader token`")
    with readers() as s:
        user = user_for_token(s, token)
        workload = get(s, user, workload_id)
        require_role(s, user, workload.project_id, "run")  # viewers may not exec
        names = [p.name for p in workload.pods]
        heads = [p.name for p in workload.pods if p.role in ("master", "launcher")]
        name = pick_pod(names, heads, workload.name, pod)
        handle, phase, backend = workload.handle, workload.phase, workload.backend
    if not handle:
        raise RingleaderError(f"workload {workload.name!r} is {phase}: it has no pods running")
    return backends.named(backend).exec_target(handle, name)

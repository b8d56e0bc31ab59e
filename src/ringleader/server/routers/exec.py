"""``exec``/``bash`` into a workload's pod: a WebSocket at /api/v1/workloads/{id}/exec.

``?pod=`` names the pod (full name or its suffix, e.g. ``worker-1``; default
the master or launcher pod), ``?command=`` repeats once per argv word, and
``?tty=true`` asks for a terminal.  The caller must hold a bearer token for a
project the workload belongs to, as for every other workload route; a refusal
arrives as the session's status message (see ``exec_session``), so the client
can print the server's own words.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from starlette.concurrency import run_in_threadpool

from ringleader.errors import InvalidSpec, NotFound, RingleaderError, Unauthorized
from ringleader.server.auth import user_for_token
from ringleader.server.backends.base import ExecTarget
from ringleader.server.exec_session import ExecSession, status_frame
from ringleader.server.services import workloads as svc

router = APIRouter(prefix="/api/v1/workloads", tags=["workloads"])
_HTTP = [(Unauthorized, 401), (NotFound, 404), (InvalidSpec, 422)]


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


def resolve(websocket: WebSocket, workload_id: str, pod: str | None) -> ExecTarget:
    """Authorize the caller and find where the command runs (blocking: DB and /proc)."""
    header = websocket.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("missing bearer token; get one with `ringleader token`")
    app = websocket.app
    with app.state.readers() as s:
        user = user_for_token(s, token)
        workload = svc.get(s, user, workload_id)
        names = [p.name for p in workload.pods]
        heads = [p.name for p in workload.pods if p.role in ("master", "launcher")]
        name = pick_pod(names, heads, workload.name, pod)
        handle, phase = workload.handle, workload.phase
    if not handle:
        raise RingleaderError(f"workload {workload.name!r} is {phase}: it has no pods running")
    return app.state.backend.exec_target(handle, name)


@router.websocket("/{workload_id}/exec")
async def exec_in_pod(
    websocket: WebSocket,
    workload_id: str,
    pod: str | None = None,
    command: list[str] = Query(default=[]),
    tty: bool = False,
) -> None:
    await websocket.accept()
    try:
        target = await run_in_threadpool(resolve, websocket, workload_id, pod)
        session = ExecSession(target, command or ["bash"], tty)
        session.start()
    except RingleaderError as exc:
        code = next((c for kind, c in _HTTP if isinstance(exc, kind)), 409)
        await websocket.send_bytes(status_frame(error=str(exc), code=code))
        await websocket.close()
        return
    except OSError as exc:
        await websocket.send_bytes(status_frame(error=f"cannot run {command[:1]}: {exc}", code=422))
        await websocket.close()
        return

    async def receive() -> bytes | None:
        try:
            message = await websocket.receive()
        except WebSocketDisconnect:
            return None
        if message["type"] == "websocket.disconnect":
            return None
        return message.get("bytes") or (message.get("text") or "").encode()

    try:
        code = await session.relay(websocket.send_bytes, receive)
        if code is not None:
            await websocket.send_bytes(status_frame(exitCode=code))
            await websocket.close()
    except WebSocketDisconnect:
        pass
    finally:
        await asyncio.get_running_loop().run_in_executor(None, session.stop)

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

from ringleader.errors import Forbidden, InvalidSpec, NotFound, RingleaderError, Unauthorized
from ringleader.server.exec_session import ExecSession, status_frame
from ringleader.server.services.exec import exec_target

router = APIRouter(prefix="/api/v1/workloads", tags=["workloads"])
_HTTP = [(Unauthorized, 401), (Forbidden, 403), (NotFound, 404), (InvalidSpec, 422)]


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
        target = await run_in_threadpool(
            exec_target,
            websocket.app.state.readers,
            websocket.app.state.backends,
            websocket.headers.get("authorization", ""),
            workload_id,
            pod,
        )
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

"""``exec``/``bash`` into a workload's pod: a WebSocket at /api/v1/workloads/{id}/exec.

``?pod=`` names the pod (full name or its suffix, e.g. ``worker-1``; default
the master or launcher pod), ``?command=`` repeats once per argv word, and
``?tty=true`` asks for a terminal.  The caller must hold a bearer token for a
project the workload belongs to, as for every other workload route, and be its
submitter or an admin (of the project or global: the session runs as the
submitter's account, ``services.exec``); a refusal arrives as the session's
status message (see ``exec_session``), so the client can print the server's
own words.  An interactive ``bash`` gets a prompt
naming the workload and pod; the final status says why a session ended when
its own exit code does not (``reason``: the workload was deleted, stopped or
ended, the pod ended, a signal; the server stopping).
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from starlette.concurrency import run_in_threadpool

from ringleader.errors import RingleaderError
from ringleader.server.exec_session import ExecSession, status_frame
from ringleader.server.http_status import status_of
from ringleader.server.services.exec import exec_target, shell_argv, why_ended

router = APIRouter(prefix="/api/v1/workloads", tags=["workloads"])


@router.websocket("/{workload_id}/exec")
async def exec_in_pod(
    websocket: WebSocket,
    workload_id: str,
    pod: str | None = None,
    command: list[str] = Query(default=[]),
    tty: bool = False,
) -> None:
    await websocket.accept()
    readers = websocket.app.state.readers
    rcfile: str | None = None
    try:
        place = await run_in_threadpool(
            exec_target,
            readers,
            websocket.app.state.backends,
            websocket.headers.get("authorization", ""),
            workload_id,
            pod,
            websocket.app.state.sessions,
        )
        argv, rcfile = shell_argv(place, command or ["bash"], tty)
        session = ExecSession(place.target, argv, tty, rcfile)
        session.start()
    except RingleaderError as exc:
        _remove(rcfile)
        code = status_of(exc, default=409)  # a pod that cannot take a session now
        await websocket.send_bytes(status_frame(error=str(exc), code=code))
        await websocket.close()
        return
    except OSError as exc:
        _remove(rcfile)
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
            reason = await run_in_threadpool(why_ended, readers, place, code)
            status: dict[str, object] = {"exitCode": 128 - code if code < 0 else code}
            if code < 0:
                status["signal"] = -code
            if reason:
                status["reason"] = reason
            await websocket.send_bytes(status_frame(**status))
            await websocket.close()
    except WebSocketDisconnect:
        pass
    except asyncio.CancelledError:  # the server is stopping: say so before the socket goes
        with contextlib.suppress(Exception):
            await asyncio.shield(
                websocket.send_bytes(
                    status_frame(error="the server stopped, and the session with it", code=503)
                )
            )
        raise
    finally:
        _remove(rcfile)
        await asyncio.get_running_loop().run_in_executor(None, session.stop)


def _remove(path: str | None) -> None:
    """The session's rc file, if bash has not removed it itself."""
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)

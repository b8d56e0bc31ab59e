"""`bash NAME` and `exec NAME -- CMD`: a shell or command inside a workload's pod.

The terminal side of ``server.exec_session``'s protocol: stdin goes up on
channel 0 (raw, when a TTY was asked for), channels 1/2 come down to this
process's stdout/stderr, and the status message ends the session with the
remote command's exit code, which becomes ours (128+N for signal N).

A session never ends without saying why, on stderr once the terminal is
back to normal: the server's reason (the workload was deleted or stopped,
the pod ended, a signal), else ``command terminated with exit code N`` for a
non-zero exit (as ``kubectl exec`` says it), or that the connection to the
server was lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from typing import Any

import typer

from ringleader.cli.common import client, reports_errors
from ringleader.client_errors import ERRORS
from ringleader.errors import RingleaderError
from ringleader.server.exec_session import (
    MAX_WINDOW,
    RESIZE,
    STATUS,
    STDERR,
    STDIN,
    STDOUT,
    frame,
)


class RemoteError(RingleaderError):
    """The server refused the session; its message says why."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _window(fd: int) -> bytes | None:
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return None
    if not (1 <= size.lines <= MAX_WINDOW and 1 <= size.columns <= MAX_WINDOW):
        return None  # a terminal that reports no size (0x0): the server would ignore it
    return frame(RESIZE, json.dumps({"rows": size.lines, "cols": size.columns}).encode())


class SessionLost(RingleaderError):
    """The connection ended before the session's status came."""


def read_status(payload: bytes) -> int:
    """The exit code a status message carries; RemoteError for a refusal or failure."""
    return read_end(payload)[0]


def read_end(payload: bytes) -> tuple[int, str]:
    """``(exit code, why)`` from a status message (why: "" when the code says it all)."""
    try:
        status = json.loads(payload)
        if not isinstance(status, dict):
            raise ValueError(status)
        if "error" in status:
            code = status.get("code", 0)
            kind = ERRORS.get(code) if type(code) is int else None
            raise RemoteError(
                str(status["error"]), kind.exit_code if kind else RingleaderError.exit_code
            )
        code = status.get("exitCode", 1)
        if type(code) is not int:
            raise ValueError(code)
        reason = status.get("reason") or ""
    except ValueError:
        raise RingleaderError(
            f"the server ended the session with an unreadable status: {payload[:200]!r}"
        ) from None
    return code, str(reason)[:1000]


def ending(code: int, reason: str) -> str:
    """The line that says why a session ended ("" for a plain success)."""
    if reason:
        return f"ringleader: {reason} (exit code {code})"
    if code != 0:
        return f"ringleader: command terminated with exit code {code}"
    return ""


def _send_input(ws: Any) -> None:
    """stdin -> channel 0 until end of input (then an empty frame says so)."""
    fd = sys.stdin.fileno()
    try:
        while True:
            data = os.read(fd, 65536)
            if not data:
                break
            ws.send(frame(STDIN, data))
        ws.send(frame(STDIN))
    except Exception:  # the session ended (socket closed) while we read: nothing to do
        return


def run_session(ws: Any, *, tty: bool, send_stdin: bool) -> int:
    """Relay one session; the remote exit code, once why it ended is on stderr."""
    code, reason = _relay(ws, tty=tty, send_stdin=send_stdin)
    said = ending(code, reason)
    if said:
        print(said, file=sys.stderr, flush=True)
    return code


def _relay(ws: Any, *, tty: bool, send_stdin: bool) -> tuple[int, str]:
    """Relay one session (the terminal restored at its end); its exit code and why."""
    outs = {STDOUT: sys.stdout.buffer, STDERR: sys.stderr.buffer}
    restore = None
    if tty:
        import termios
        import tty as ttymod

        fd = sys.stdin.fileno()
        restore = termios.tcgetattr(fd)
        ttymod.setraw(fd, termios.TCSANOW)  # keep what was typed ahead
        first = _window(fd)
        if first:
            ws.send(first)
        signal.signal(signal.SIGWINCH, lambda *_: (size := _window(fd)) and ws.send(size))
    try:
        if send_stdin:
            threading.Thread(target=_send_input, args=(ws,), daemon=True).start()
        for message in ws:
            if isinstance(message, str):
                message = message.encode()
            if not message:
                continue
            channel, payload = message[0], message[1:]
            if channel in outs:
                outs[channel].write(payload)
                outs[channel].flush()
            elif channel == STATUS:
                return read_end(payload)
        raise SessionLost("the server closed the connection before the session ended")
    finally:
        if restore is not None:
            import termios

            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, restore)
            signal.signal(signal.SIGWINCH, signal.SIG_DFL)
        with contextlib.suppress(Exception):
            ws.close()


def _exec(
    name: str, command: list[str], pod: str | None, project: str | None, stdin: bool, tty: bool
) -> None:
    c = client()
    workload = c.find(name, project)
    tty = tty and sys.stdin.isatty()  # no terminal to make raw: plain pipes instead
    from websockets.exceptions import InvalidStatus, WebSocketException

    try:
        ws = c.exec_socket(workload.workload_id, command, pod=pod, tty=tty)
        code = run_session(ws, tty=tty, send_stdin=stdin or tty)
    except InvalidStatus as exc:
        raise RingleaderError(f"the server refused the exec session: {exc}") from None
    except (SessionLost, WebSocketException, OSError) as exc:
        raise SessionLost(lost_server(c.url, name, exc)) from None
    raise typer.Exit(code)


GOING_AWAY = (1001, 1012)  # WebSocket close codes of a server stopping or restarting


def lost_server(url: str, name: str, exc: BaseException) -> str:
    """Why a session ended without its status: the server stopped, or the link broke."""
    received = getattr(exc, "rcvd", None)
    if received is not None and received.code in GOING_AWAY:
        what = f"the server at {url} stopped"
    else:
        what = f"lost the connection to the server at {url} ({exc})"
    return (
        f"{what}, and the session ended with it; `ringleader describe {name}` shows the "
        "workload once the server is back"
    )


POD = typer.Option(
    None,
    "--pod",
    metavar="POD",
    help="Pod name or suffix, e.g. worker-1 (default: the master or launcher).",
)
PROJECT = typer.Option(
    None, "-p", "--project", metavar="NAME", help="Project (default: the current one)."
)


@reports_errors
def exec_command(
    name: str = typer.Argument(..., help="Workload name or id."),
    command: list[str] = typer.Argument(..., help="The command, after --."),
    pod: str = POD,
    stdin: bool = typer.Option(False, "-i", "--stdin", help="Pass this terminal's input on."),
    tty: bool = typer.Option(False, "-t", "--tty", help="Allocate a terminal (with -i)."),
    project: str = PROJECT,
) -> None:
    """Run a command in a pod: its working directory, its environment (RANK, MASTER_ADDR...).

    The exit code is the command's.  Only a running pod can be exec'd; submit
    with --interactive to keep pods up after their command ends.

    Examples:
      ringleader exec mnist -- nvidia-smi
      ringleader exec mnist --pod worker-1 -- env
      ringleader exec mnist -it -- python
    """
    _exec(name, command, pod, project, stdin, tty)


@reports_errors
def bash(
    name: str = typer.Argument(..., help="Workload name or id."),
    pod: str = POD,
    project: str = PROJECT,
) -> None:
    """Open a shell in a pod (default: the master or launcher pod).

    With a terminal you get an interactive bash; piped input runs as a script.

    Examples:
      ringleader bash mnist
      echo 'echo $RANK' | ringleader bash mnist --pod worker-0
    """
    _exec(name, ["bash"], pod, project, True, True)

"""The ``ringleader server`` process's edges: its signals, exit code, listening socket and
what it prints.

Kept apart from ``cli/server.py`` (the command's options, their checks and ``serve``'s
sequence) because these are what the operating system and the person watching see:
how SIGTERM and Ctrl-C end the process (``Terminated``, ``INTERRUPTED``), the words
that name them, the lines printed at once (``say``, ``banner``) and the socket bound
before any start-up work (``listening_socket``).
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ringleader.server.config import ServerConfig


INTERRUPTED = 130  # a shell's code for a command ended by Ctrl-C (128 + SIGINT)
SIGNAL_WORDS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


def say(text: str) -> None:
    """A line for whoever watches the server (its terminal, or server.log), at once."""
    print(text, flush=True)


def banner(config: ServerConfig, url: str) -> str:
    """What a user needs once the server answers: where it is, where its state and the
    admin's credentials are, and the commands to use it from another shell."""
    from ringleader import __version__

    data_dir = config.data_dir.resolve()
    credentials = data_dir / "credentials.json"
    if credentials.exists():
        creds = f"{credentials}  (the admin's access key, 0600)"
    else:
        creds = "none in the data directory: log in with an access key (`ringleader login`)"
    lines = [
        f"ringleader server {__version__} is ready at {url}",
        f"  web UI:         {url}/  (log in with an access key)",
        f"  data directory: {data_dir}  (database, every run's logs)",
        f"  credentials:    {creds}",
    ]
    database = config.resolved_database_url()
    if not database.startswith("sqlite"):
        from sqlalchemy.engine import make_url

        lines.append(f"  database:       {make_url(database).render_as_string(hide_password=True)}")
    if config.backends:
        choices = ", ".join(
            f"{c.name}{':' + c.arg if c.arg else ''}" + (f" for pool {c.pool}" if c.pool else "")
            for c in config.backends
        )
        lines.append(f"  backends:       {choices}  (--backend)")
    lines.append(
        "  workloads run:  as "
        + ("each user's OS account" if config.run_as == "user" else "this server's user")
        + f" (--run-as {config.run_as})"
    )
    exports = [f"export RINGLEADER_URL={url}"]
    if data_dir != (Path.home() / ".ringleader").resolve():  # another shell's default home
        exports.append(f"export RINGLEADER_HOME={data_dir}")
    lines += ["From another shell:", *(f"  {line}" for line in exports), "  ringleader list"]
    if config.host in ("0.0.0.0", "::", ""):
        lines.append(
            f"From another machine: `ringleader login --url http://{socket.gethostname()}:"
            f"{url.rsplit(':', 1)[1]}` with an access key (`ringleader access-key create`)"
        )
    lines.append(f"Stop it with Ctrl-C, or `kill {os.getpid()}` (SIGTERM).")
    return "\n".join(lines)


class Terminated(BaseException):
    """SIGTERM arrived; raised so that ``finally`` blocks (the record's removal) run.

    uvicorn catches SIGTERM itself, shuts down gracefully, puts back the handler
    it found and raises the signal again: with the default handler there, the
    process died before removing its record.  This one is found instead.
    """


def raise_terminated(signum: int, frame: FrameType | None) -> None:
    """SIGTERM's handler while the server runs: ``Terminated``, so ``finally`` blocks run."""
    raise Terminated


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port``, bound before start-up work so that a second
    server racing for the port fails at once; OSError when it cannot be had."""
    # IPPROTO_TCP named explicitly: asyncio sets TCP_NODELAY on accepted sockets only when
    # the listener's protocol says TCP; with 0 every response waited ~40 ms for an ACK.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)  # a bound socket alone does not keep another from binding
    except OSError:
        sock.close()
        raise
    return sock

"""Which server a client talks to, and starting this home's server when none runs.

In order: ``RINGLEADER_URL``; the ``url`` of ``$RINGLEADER_HOME/config.json``
(``ringleader login --url``) unless it is the default ``LOCAL_URL``; the URL
in the record of the server that runs for this home (``ringleader.home``), on
whatever port it was started; else ``LOCAL_URL``, where ``local_server``
starts one in the background (the first ``submit`` of a new user does).

Why the record comes before the default: ``ringleader server --port 8478``
followed by ``ringleader list`` in the same home must reach that server, not
start a second one on 8470 over the same database (which its lock would
refuse anyway).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ringleader.defaults import DEFAULT_PORT, home_dir
from ringleader.errors import ServerUnreachable
from ringleader.home import live_record

LOCAL_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
START_TIMEOUT_S = 60.0
PERSONAL = ("--run-as", "server")  # a home's own server runs its one user's workloads as them


def read_config(home: Path | None = None) -> dict[str, Any]:
    path = (home or home_dir()) / "config.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_config(updates: dict[str, Any], home: Path | None = None) -> None:
    home = home or home_dir()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = {**read_config(home), **updates}
    path = home / "config.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(data, indent=2) + "\n")


def configured_url(home: Path | None = None) -> str | None:
    """A server chosen on purpose: ``RINGLEADER_URL``, or a login's URL other than the default.

    A config ``url`` equal to ``LOCAL_URL`` (a ``login`` without ``--url``)
    means "this machine's server", so the home's record may point elsewhere.
    """
    url = os.environ.get("RINGLEADER_URL") or read_config(home).get("url")
    return url if url and url != LOCAL_URL else None


def current_project(home: Path | None = None) -> str | None:
    """The project commands use by default: ``RINGLEADER_PROJECT``, else ``project set``'s."""
    return os.environ.get("RINGLEADER_PROJECT") or read_config(home).get("project")


def url_source(home: Path | None = None) -> str | None:
    """Where ``server_url`` found its URL, for messages: the fix for a server that does
    not answer depends on it (start one here, or point elsewhere)."""
    home = home or home_dir()
    if os.environ.get("RINGLEADER_URL"):
        return "RINGLEADER_URL"
    if configured_url(home):
        return f"{home / 'config.json'}, written by `ringleader login --url`"
    return None


def server_url(home: Path | None = None) -> str:
    """Where this home's commands go, starting nothing (see the module's docstring)."""
    home = home or home_dir()
    record = live_record(home)
    return configured_url(home) or (record.url if record else LOCAL_URL)


def start_local_server(home: Path) -> subprocess.Popen[bytes]:
    """Start the embedded server detached; it outlives this command."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = open(home / "server.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        # This home's own server, started for its one user: workloads run as that user
        # (a shared server, started as root on purpose, runs each user's as their account).
        [sys.executable, "-m", "ringleader", "server", "--port", str(DEFAULT_PORT), *PERSONAL],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        env={**os.environ, "RINGLEADER_HOME": str(home)},
    )
    log.close()
    return proc


def local_server(home: Path) -> str:
    """The URL of this home's server once it answers, started on ``LOCAL_URL`` if none runs.

    A recorded server that is still starting is waited for, not doubled; one
    whose record is stale (killed with -9) is replaced.  A server started here
    that exits at once lost the home's lock (or the port) to another command's
    server, which may still be starting: that one is waited for instead.
    """
    record = live_record(home)
    if healthy(record.url if record else LOCAL_URL):
        return record.url if record else LOCAL_URL
    proc = None
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        record = live_record(home)
        url = record.url if record else LOCAL_URL
        if healthy(url):
            # Read again: a server started here binds before it publishes its record, so
            # the check may have connected before the record existed and been answered after.
            record = live_record(home) or record
            if proc is not None and record is not None and record.pid == proc.pid:
                _say_started(home, url, proc.pid)  # ours answers (not a racing command's)
            return url
        exited = proc is not None and proc.poll() is not None
        if record is None and proc is None:
            proc = start_local_server(home)
        elif record is None and exited and not port_taken(LOCAL_URL):  # failed, not a lost race
            raise ServerUnreachable(
                url,
                "the server started for this home exited at once",
                fix=f"see why in {home / 'server.log'}, or run `ringleader server` to watch it",
            )
        if time.monotonic() > deadline:
            who = f"its server (pid {record.pid})" if record else "the server started for it"
            raise ServerUnreachable(
                url,
                f"{who} did not answer within {START_TIMEOUT_S:g} s",
                fix=f"see why in {home / 'server.log'}",
            )
        time.sleep(0.1)


def _say_started(home: Path, url: str, pid: int) -> None:
    """Tell the user (on stderr: stdout is the command's own) that a server now runs
    in the background for this home, where its log is, and how to stop it."""
    print(
        f"ringleader: started a server for {home} at {url} (pid {pid}); it keeps running "
        f"in the background (log: {home / 'server.log'}; stop it with `kill {pid}`)",
        file=sys.stderr,
    )


def port_taken(url: str) -> bool:
    """Something accepts connections at ``url``'s host and port (healthy or not)."""
    import httpx  # here, not at the top: `login` and `config` import this module too

    parsed = httpx.URL(url)
    try:
        socket.create_connection((parsed.host, parsed.port or 80), timeout=1).close()
    except OSError:
        return False
    return True


def wait_healthy(url: str, proc: subprocess.Popen[bytes] | None, timeout_s: float) -> bool:
    """Whether a server starting at ``url`` answers ``/healthz`` within ``timeout_s``;
    False at once when ``proc`` (the process starting it) has exited."""
    deadline = time.monotonic() + timeout_s
    while not healthy(url):
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def healthy(url: str) -> bool:
    """A ringleader server answers at ``url`` (within a second)."""
    import httpx

    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False

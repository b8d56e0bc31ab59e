"""Whether a server takes part in an election, and its part's pieces.

On PostgreSQL a server always does (``ServerConfig.ha`` None): a lone one takes
the free lease at once, a second one becomes its standby. ``ha=False`` runs one
server without a lease (benchmarks of the bare write path; never two of those on
one database). On SQLite there is no standby: asking for one is an error that
says so (``check``).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from ringleader.errors import InvalidSpec
from ringleader.server.db import is_sqlite

SERVER_ID_FILE = "server-id"


def check(ha: bool | None, url: str) -> bool:
    """Whether this server elects (see the module docstring); InvalidSpec on SQLite."""
    if is_sqlite(url):
        if ha:
            raise InvalidSpec(
                "a standby server needs PostgreSQL (--db postgresql+psycopg://USER@HOST/DB); "
                "SQLite serves one server only",
                "--ha",
            )
        return False
    return ha is not False


def server_id(data_dir: Path) -> str:
    """This home's server id, kept in the home: a restart of the same home (one server
    per home: its lock) takes back its own lease at once instead of waiting it out."""
    path = data_dir / SERVER_ID_FILE
    try:
        found = path.read_text().strip()
    except OSError:
        found = ""
    if found:
        return found
    new = uuid.uuid4().hex[:16]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(new + "\n")
    return new

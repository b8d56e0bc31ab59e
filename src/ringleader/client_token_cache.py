"""The CLI's bearer token, kept between commands in the home.

Why: every command is a new process, and without this each one exchanged its
access key for a new token (``POST /api/v1/token``): a PBKDF2 check of the
secret on the server (~0.25 s of its CPU here) before the command's own call,
and one more token row per command.  ``ringleader list`` spent most of its
time there.

Invariants:
- the file is the home's own: written 0600 through ``home.write_private``
  (exclusive new file, renamed), read only when it is a regular file owned by
  this user that no one else may read or write, never through a link;
- a token is reused only for the same server URL and the same access key
  (``clientId``), and only while it has more than ``MARGIN_S`` left;
- a refused token costs nothing more than before: the client's one retry with
  a fresh token (``Client.request``) replaces the file;
- anything unreadable, malformed or stale is ignored, never an error.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from pathlib import Path

FILE = "token.json"
MARGIN_S = 60.0
MAX_BYTES = 16 * 1024


def load(path: Path, url: str, client_id: str) -> str | None:
    """The kept token for ``url`` and ``client_id`` while it has time left; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            return None
        try:
            kept = json.loads(handle.read(MAX_BYTES))
        except (OSError, ValueError):
            return None
    if not isinstance(kept, dict):
        return None
    token, expires = kept.get("token"), kept.get("expiresAt")
    if kept.get("url") != url or kept.get("clientId") != client_id or not isinstance(token, str):
        return None
    if not isinstance(expires, (int, float)) or expires - MARGIN_S < time.time():
        return None
    return token


def save(path: Path, url: str, client_id: str, token: str, expires_in_s: float) -> None:
    """Keep ``token`` for the next command; a home that cannot be written keeps nothing."""
    from ringleader.home import write_private

    kept = {"url": url, "clientId": client_id, "token": token,
            "expiresAt": time.time() + expires_in_s}  # fmt: skip
    with contextlib.suppress(OSError):
        write_private(path, json.dumps(kept))


def forget(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()

"""Names every layer agrees on: the server's default port and the home it uses.

Why a module of its own: the client, the connection helpers and the error
messages need these as much as the server does; defined in ``server/config.py``
they made the bottom of the house (``errors``) import the server.  Standard
library only, imported by anything.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_PORT = 8470


def home_dir() -> Path:
    """``RINGLEADER_HOME``, else ``~/.ringleader``: the server's data, the client's login."""
    return Path(os.environ.get("RINGLEADER_HOME") or Path.home() / ".ringleader")


def home_inside(directory: Path) -> str | None:
    """This machine's home relative to ``directory`` when it lies inside it (as
    ``a/b``), else None: its database, logs and access key are this machine's, never
    code, so ``sync`` does not copy it and ``doctor`` leaves it out of the code check."""
    home, where = home_dir().resolve(), directory.resolve()
    if home == where or not home.is_relative_to(where):
        return None
    return home.relative_to(where).as_posix()

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

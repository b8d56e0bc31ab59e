"""A migrated database as the loops' and services' tests start from it."""

from __future__ import annotations

from pathlib import Path

from ringleader.server import auth, inventory
from ringleader.server.db import Database, default_database_url, open_database
from ringleader.server.migrate import upgrade


def one_node_database(folder: Path) -> Database:
    """A migrated SQLite database in ``folder`` with the first-run admin and one
    simulated 2-GPU node (the caller disposes of it)."""
    url = default_database_url(folder)
    upgrade(url)
    database = open_database(url)
    with database.writer() as s, s.begin():
        auth.bootstrap(s, folder / "credentials.json", "http://x")
        inventory.sync_nodes(s, inventory.simulated_nodes("1x2gpu"))
    return database

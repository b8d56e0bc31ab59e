"""The services' tests' database: migrated, with the first-run admin and one node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.server.db import Database
from tests.helpers.database import one_node_database


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    """A migrated database with the first-run admin and one simulated 2-GPU node."""
    database = one_node_database(tmp_path)
    yield database
    database.dispose()

"""CLI fixtures: the real server process of tests/server (``server``)."""

from tests.server.conftest import server  # noqa: F401

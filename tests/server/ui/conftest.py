"""The web UI's tests: a real server and Debian's Chromium (tests/fixtures/browser.py)."""

from tests.fixtures.browser import chromium, ui, ui_server  # noqa: F401

"""The CLI's terminal-safe text (``cli/safetext``): tenant-written control characters
become visible text, everything else stays as it was."""

from __future__ import annotations

from datetime import datetime, timezone

from ringleader.cli.safetext import visible, visible_data
from ringleader.server.schemas import EventOut


def test_control_characters_become_visible_and_newlines_tabs_stay() -> None:
    assert visible("\x1b]0;pwned\x07\x1b[2J") == "^[]0;pwned^G^[[2J"
    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible("\x00\r\x7f") == "^@^M^?"
    assert visible("\x9b31m") == "\\x9b31m"  # C1 CSI: some terminals obey it too
    assert visible("héllo ✓ 日本 ^[") == "héllo ✓ 日本 ^["  # printable text is untouched


def test_every_string_of_an_object_is_made_visible_and_its_type_kept() -> None:
    event = EventOut(
        id="1",
        time=datetime(2026, 1, 1, tzinfo=timezone.utc),
        type="PhaseChanged",
        reason="\x1b[2J",
        message="boom\x1b]0;t\x07",
    )
    shown = visible_data({"events": [event], "n": 3, "spec": {"command": "echo \x1b[31m"}})
    copy = shown["events"][0]
    assert isinstance(copy, EventOut) and copy.time == event.time
    assert (copy.reason, copy.message) == ("^[[2J", "boom^[]0;t^G")
    assert shown["n"] == 3 and shown["spec"] == {"command": "echo ^[[31m"}
    assert event.message == "boom\x1b]0;t\x07"  # the original is not changed
    assert visible_data(("a\x1b", None)) == ("a^[", None)

"""Tenant-written text never breaks the database (issue 22): a workload controls the
text of its error file and its last lines, which become its phase message and its
events.  PostgreSQL refuses NUL in text and long reasons; one such row would fail
the reconciler's whole transaction on every pass.  The one door for status
(``phases``) stores such text as ``storable`` makes it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ringleader.server.models import Workload
from ringleader.server.phases import (
    ELLIPSIS,
    MESSAGE_CHARS,
    REASON_CHARS,
    TYPE_CHARS,
    note_pending,
    storable,
    transition,
)
from tests.server.conftest import API

# A rank that fails with an error file no database would take as it is.
FAILS_ODDLY = r"""
import json, os, sys
message = "boom\x00NUL \ud800 lone \x1b]0;pwned\x07\x1b[2J " + "x" * 4000
path = os.environ["TORCHELASTIC_ERROR_FILE"]
with open(path, "w") as out:
    json.dump({"message": {"message": message, "extraInfo": {"py_callstack": message,
               "timestamp": "0"}}}, out)
print("last words\x00 " + "y" * 4000, flush=True)
sys.exit(3)
"""


def test_storable_replaces_what_no_row_holds_and_caps_the_length() -> None:
    assert storable("a\x00b\ud800c") == "a\ufffdb\ufffdc"
    assert storable("\x1b[2J\ttab\nline") == "\x1b[2J\ttab\nline"  # the printer's business
    cut = storable("z" * 20_000)
    assert len(cut) == MESSAGE_CHARS and cut.endswith(ELLIPSIS) and cut.startswith("zzz")
    assert storable("z" * MESSAGE_CHARS) == "z" * MESSAGE_CHARS  # at the bound: untouched
    assert len(storable("r" * 300, REASON_CHARS)) == REASON_CHARS


def test_the_door_stores_what_it_is_given_safely() -> None:
    w = Workload(name="w", phase="Pending", phase_reason="", phase_message="")
    events: list[object] = []

    class Recorder:
        def add(self, row: object) -> None:
            events.append(row)

    note_pending(Recorder(), w, "R" * 300, "m\x00" * 10_000)  # type: ignore[arg-type]
    assert len(w.phase_reason) == REASON_CHARS and "\x00" not in w.phase_message
    assert len(w.phase_message) == MESSAGE_CHARS
    assert len(events[0].type) == TYPE_CHARS  # type: ignore[attr-defined]
    transition(Recorder(), w, "Running", reason="x\x00", message="y\x00")  # type: ignore[arg-type]
    assert (w.phase_reason, w.phase_message) == ("x\ufffd", "y\ufffd")


def test_a_workload_failing_with_nul_and_long_text_fails_cleanly_on_either_database(
    api: API, tmp_path: Path
) -> None:
    script = tmp_path / "fails_oddly.py"
    script.write_text(FAILS_ODDLY)
    odd = api.submit("odd", f"python {script}", backoffLimit=0).json()["workloadId"]
    failed = api.wait_phase(odd, {"Failed", "Completed"})
    assert failed["actualPhase"] == "Failed", failed
    message = failed["phaseMessage"]
    assert "boom" in message and "\x00" not in message and "\ud800" not in message, message
    events = api.get(f"/api/v1/workloads/{odd}/events")
    assert events.status_code == 200, events.text
    assert all("\x00" not in json.dumps(e) for e in events.json()["events"])
    # The loops go on: the next workload runs to its end.
    after = api.submit("after", "true").json()["workloadId"]
    assert api.wait_phase(after, {"Completed", "Failed"})["actualPhase"] == "Completed"

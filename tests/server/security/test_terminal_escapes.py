"""Terminal escapes from a workload never reach an admin's terminal raw (issue 22,
finding 9).  A tenant's workload prints an OSC title change and a clear-screen in
its logs and writes them into its error file (its failure message and events);
the admin reads them with ``logs`` and ``describe`` on a real pseudo-terminal:
the escapes show as ``^[``, and are obeyed only with ``--raw``.  Logs into a pipe
stay byte-exact.
"""

from __future__ import annotations

import subprocess
import sys

from tests.fixtures.tenants import Site, tenant_site  # noqa: F401 (the fixture: site)
from tests.fixtures.terminal import Terminal

ESCAPES = "\x1b]0;pwned\x07\x1b[2J"
SHOWN = "^[]0;pwned^G^[[2J"
FAILS_LOUDLY = r"""
import json, os, sys
escapes = "\x1b]0;pwned\x07\x1b[2J"
print("before " + escapes + " after", flush=True)
with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as out:
    json.dump({"message": {"message": "RuntimeError: " + escapes, "extraInfo": {
               "py_callstack": "Traceback: " + escapes, "timestamp": "0"}}}, out)
sys.exit(1)
"""


def _on_terminal(site: Site, *args: str) -> str:
    """What the admin's terminal receives from ``ringleader ARGS``."""
    argv = [sys.executable, "-m", "ringleader", *args]
    with Terminal(argv, {**site.server.env, "TERM": "xterm-256color"}) as term:
        assert term.wait(120) == 0, term.transcript
        return term.transcript


def test_a_workloads_escapes_are_shown_not_obeyed_on_an_admins_terminal(site: Site) -> None:
    tenant = site.user("escaper")
    script = site.script("escapes.py", FAILS_LOUDLY)
    sub = site.as_user(tenant, "submit-dist", "pytorch", "loud", "--workers", "1",
                       "--backoff-limit", "0", "--", "python", script)  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    site.wait_phase("loud", "Failed")

    logs = _on_terminal(site, "logs", "loud")
    assert f"before {SHOWN} after" in logs and "\x1b]0;" not in logs and "\x1b[2J" not in logs
    raw_logs = _on_terminal(site, "logs", "loud", "--raw")
    assert ESCAPES in raw_logs
    piped = subprocess.run(
        [sys.executable, "-m", "ringleader", "logs", "loud"],
        env=site.server.env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert f"before {ESCAPES} after".encode() in piped.stdout  # a pipe gets the bytes

    described = _on_terminal(site, "describe", "loud")
    assert SHOWN in described, described
    assert "\x1b]0;" not in described and "\x1b[2J" not in described and "\x07" not in described
    raw = _on_terminal(site, "describe", "loud", "--raw")
    assert "\x1b]0;pwned" in raw and "\x1b[2J" in raw  # (rich itself drops BEL)
    assert site.server.cli("delete", "loud").returncode == 0

"""What a rank run as a workload's account tries, to show what it cannot reach:
the probe scripts of ``test_run_as.py`` (the sudo account) and
``test_run_as_account.py`` (a root server's per-user accounts) share these lines.

A probe prints one ``RESULT {json}`` line: each attempt's key is ``"ok"`` or the
name of the OSError it met (``PermissionError``...), never a traceback.
"""

from __future__ import annotations

import json
import re

#: Python lines for a probe script with ``json``, ``os``, ``paths`` and ``out`` defined.
ATTEMPTS = r"""def attempt(key, fn):
    try:
        fn()
        out[key] = "ok"
    except OSError as exc:
        out[key] = type(exc).__name__
attempt("credentials", lambda: open(paths["credentials"]).read())
attempt("database", lambda: open(paths["database"], "rb").read(16))
attempt("home_listing", lambda: os.listdir(paths["home"]))
attempt("other_run", lambda: os.listdir(paths["other_run"]))
attempt("other_log", lambda: open(paths["other_log"]).read())
"""


def probe_result(logs: str) -> dict[str, object]:
    """The probe's ``RESULT`` line from a workload's logs."""
    found = re.search(r"RESULT (\{.*\})", logs)
    assert found, logs
    return json.loads(found.group(1))

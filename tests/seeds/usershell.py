"""A user's shell for the seeds' control-plane walkthroughs: snippets pasted into bash.

Why bash and not an argv: the seeds print shell text — quotes, line continuations,
and sometimes a continuation that is not one (a backslash followed by a space, a
line without its backslash). Only a real shell shows what a user pasting them gets.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import wait_until

VENV_BIN = os.path.dirname(sys.executable)  # where `ringleader` is, as after pip install


def user_path() -> str:
    """``PATH`` with this virtualenv first, as in a shell where it is activated."""
    return f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}"


@dataclass
class UserShell:
    """bash in ``workdir`` with ``env`` (``ringleader`` on its PATH, the server's URL)."""

    workdir: Path
    env: dict[str, str]

    def paste(self, text: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``text`` pasted into bash: each line runs as bash reads it."""
        return subprocess.run(["bash", "-c", text], env=self.env, cwd=self.workdir,
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip

    def pods(self, name: str) -> dict[str, tuple[str, str]]:
        """``ringleader get NAME``'s pod table: pod -> (status, node)."""
        shown = self.paste(f"ringleader get {name}").stdout
        rows = re.findall(rf"^ ({re.escape(name)}-\S+)\s+\S+\s+(\S+)\s+(\S+)", shown, re.M)
        return {pod: (status, node) for pod, status, node in rows}

    def wait_running(self, name: str, count: int) -> dict[str, tuple[str, str]]:
        """Wait until workload ``name`` has ``count`` pods, all Running; its pod table."""

        def running() -> dict[str, tuple[str, str]] | None:
            pods = self.pods(name)
            ok = len(pods) == count and all(s == "Running" for s, _ in pods.values())
            return pods if ok else None

        return wait_until(running, 120, f"{count} running pods of {name}")  # type: ignore[return-value]

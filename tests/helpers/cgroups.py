"""Cgroup test helpers shared by the v1 and v2 tests: where a pod's cgroups are, what runs in them."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from tests.helpers.local_backend import make_request, wait_final

BURN_MB = 48  # what the completed run's rank allocates: its pod's peak is at least this


def processes_with_arg(arg: str) -> list[int]:
    """Live processes with ``arg`` in their argv (a unique one per test), by /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if arg.encode() in argv and state != "Z":
            found.append(int(entry))
    return found


def escaping_command(seconds: str, then: str) -> str:
    """Two daemons that leave the rank's session and drop the job's marker, then ``then``."""
    return (
        "sh -c 'env -u RINGLEADER_JOB_ID setsid sleep "
        f"{seconds} & env -i setsid sleep {seconds} & sleep 0.01; echo daemons up; {then}'"
    )


def unique_seconds() -> str:
    return f"1000.{uuid.uuid4().int % 10**6:06d}"


def cgroup_dirs(hierarchy, run_id: str) -> list[Path]:
    return [d for d in hierarchy.dirs(run_id) if d.exists()]


def describe_pods(server, name: str) -> str:
    return server.cli("describe", name).stdout


def pod_rows(described: str, name: str) -> list[list[str]]:
    return [ln.split() for ln in described.splitlines() if ln.strip().startswith(f"{name}-")]


def completed_after_a_daemon(backend: Any, hierarchy: Any, tmp_path: Path) -> tuple[Any, str]:
    """A one-worker run whose command leaves two daemons, allocates ``BURN_MB`` and
    burns some CPU, then exits 0: its final status and handle, once asserted
    Completed with no process and no cgroup of it left (what either hierarchy must
    give)."""
    seconds = unique_seconds()
    burn = f'python3 -c "b = bytearray({BURN_MB} << 20); sum(range(3_000_000))"'
    request = make_request(
        tmp_path / "run", workers=1, command=escaping_command(seconds, f"{burn}; exit 0")
    )
    handle = backend.start(request)
    status = wait_final(backend, handle)
    assert status.phase == "Completed", status.message
    assert processes_with_arg(seconds) == []
    assert cgroup_dirs(hierarchy, f"rl-{request.workload_id}") == []
    return status, handle

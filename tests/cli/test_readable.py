"""A CLI that explains itself (issue 13 items 3 and 7), driven as a user types it.

Through a real server: the server's banner and its words when it stops; ``list``
and ``describe`` at 80 columns (the status never cut, a failure's root cause on
its own lines, events whole) and ``-o wide|json|yaml``; ``logs`` of a workload
that waits says why, and ``-f`` waits for it to start, then follows it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.cli.conftest import run_cli
from tests.conftest import wait_until
from tests.server.conftest import ServerProcess

LONG = (
    "this deliberately long failure message from the training program runs well past "
    "one hundred and twenty characters so that nothing may cut it"
)


def _workload(server: ServerProcess, name: str) -> dict[str, Any]:
    out = run_cli("describe", name, "-o", "json", env=server.env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _submit(server: ServerProcess, name: str, *flags: str) -> None:
    sub = run_cli("submit-dist", "pytorch", name, "--workers", "1", *flags, env=server.env)
    assert sub.returncode == 0, sub.stderr


def _no_cut(text: str, width: int) -> None:
    """Nothing ellipsized, and no line wider than the terminal."""
    assert "…" not in text and "..." not in text, text
    too_wide = [line for line in text.splitlines() if len(line.rstrip()) > width]
    assert not too_wide, text


def _words(text: str) -> str:
    return " ".join(text.split())


# ----- the server's banner ------------------------------------------------------------------


def test_server_says_where_it_is_how_to_use_it_and_why_it_stops(server: ServerProcess) -> None:
    log = server.home / "server-test.log"
    banner = str(
        wait_until(lambda: "ringleader list" in (t := log.read_text()) and t, 30, "banner")
    )
    assert f"is ready at {server.url}" in banner
    assert f"web UI:         {server.url}/" in banner
    assert f"data directory: {server.home}" in banner
    assert f"credentials:    {server.home / 'credentials.json'}" in banner
    assert f"export RINGLEADER_URL={server.url}" in banner
    assert f"kill {server.proc.pid}" in banner
    # The lines under "From another shell:", pasted into a shell that knows nothing.
    block = banner.split("From another shell:\n", 1)[1].splitlines()
    pasted = "\n".join(line.strip() for line in block if line.startswith("  "))
    fresh = {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}
    fresh["PATH"] = f"{Path(sys.executable).parent}:{fresh.get('PATH', '')}"
    shell = subprocess.run(["bash", "-c", pasted], env=fresh, capture_output=True, text=True,
                           timeout=60)  # fmt: skip
    assert shell.returncode == 0 and "NAME" in shell.stdout, (pasted, shell.stderr)

    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=60) == -signal.SIGTERM
    said = log.read_text()
    assert "ringleader server: stopping (SIGTERM)" in said
    assert "ringleader server: stopped (SIGTERM)" in said

    server.start()
    wait_until(lambda: log.read_text().count("is ready at") == 2, 30, "the second banner")
    server.proc.send_signal(signal.SIGINT)  # Ctrl-C
    assert server.proc.wait(timeout=60) == 130
    assert "ringleader server: stopped (Ctrl-C)" in log.read_text()
    assert "Traceback" not in log.read_text()


# ----- list and describe --------------------------------------------------------------------


def test_list_and_describe_are_readable_at_80_columns(gpu_server: ServerProcess) -> None:
    env = gpu_server.env
    _submit(gpu_server, "done", "--", "true")
    _submit(gpu_server, "broken", "--backoff-limit", "0", "--",
            "python", "-c", f"raise SystemExit({LONG!r})")  # fmt: skip
    _submit(gpu_server, "huge", "-g", "2", "--", "true")  # 2 pods x 2 GPUs on a 2-GPU node
    wait_until(lambda: _workload(gpu_server, "done")["actualPhase"] == "Completed", 90, "done")
    wait_until(lambda: _workload(gpu_server, "broken")["actualPhase"] == "Failed", 90, "broken")
    wait_until(lambda: _workload(gpu_server, "huge")["pendingReason"], 60, "a pending reason")

    for width in (80, 60):
        listing = run_cli("list", "-A", env=env, columns=width)
        assert listing.returncode == 0, listing.stderr
        _no_cut(listing.stdout, width)
        rows = {line.split()[0]: line.split()[1] for line in listing.stdout.splitlines()
                if line.startswith(" ") and line.split()[:1] in (["done"], ["broken"], ["huge"])}  # fmt: skip
        assert rows == {"done": "Completed", "broken": "Failed", "huge": "Pending"}, listing.stdout
        assert "huge is Pending: a gang of 2 pods needs" in listing.stdout  # under the table

    wide = run_cli("list", "-A", "-o", "wide", env=env, columns=80)
    header = wide.stdout.splitlines()[0].split()
    assert header[:3] == ["NAME", "STATUS", "AGE"] and "IMAGE" in header and "USER" in header
    assert "REASON" in header and "GPUs Allocated (Requested)" in wide.stdout
    listed = json.loads(run_cli("list", "-o", "json", env=env).stdout)
    assert {w["name"]: w["actualPhase"] for w in listed["workloads"]} == rows
    as_yaml = yaml.safe_load(run_cli("distributed", "list", "-o", "yaml", env=env).stdout)
    assert {w["name"] for w in as_yaml["workloads"]} == set(rows)

    failed = run_cli("describe", "broken", env=env, columns=80)
    assert failed.returncode == 0, failed.stderr
    _no_cut(failed.stdout, 80)
    lines = failed.stdout.splitlines()
    status = next(i for i, line in enumerate(lines) if line.startswith("Status:"))
    assert lines[status].split() == ["Status:", "Failed"], lines[status]  # no "(" root cause
    cause = []
    for line in lines[status + 1 :]:
        if not line.startswith("  "):
            break
        cause.append(line)
    assert cause and "exit code 1" in cause[0], failed.stdout  # the root cause, indented
    assert LONG in _words("\n".join(cause))
    events = failed.stdout.split("Events", 1)[1]
    assert LONG in _words(events), events  # whole, wrapped, not cut at 120 characters
    assert LONG in _words(run_cli("describe", "broken", env=env, columns=250).stdout.split(
        "Events", 1)[1])  # fmt: skip
    pod_status = re.findall(r"^ broken-(?:master|worker)-0\s+\S+\s+(\S+)", failed.stdout, re.M)
    assert sorted(pod_status) in (["Failed", "Failed"], ["Failed", "Stopped"]), failed.stdout

    completed = run_cli("describe", "done", env=env, columns=80)
    _no_cut(completed.stdout, 80)
    assert "Status: Completed\n" in completed.stdout, completed.stdout
    assert "(Completed)" not in completed.stdout and "Desired" not in completed.stdout
    pending = run_cli("describe", "huge", env=env, columns=80).stdout
    assert re.search(r"^Status: Pending \(Unschedulable\)\n  a gang of 2 pods", pending, re.M)
    assert "Pods: none yet (it waits to be scheduled)" in pending

    data = yaml.safe_load(run_cli("get", "broken", "-o", "yaml", env=env).stdout)
    assert data["actualPhase"] == "Failed" and len(data["pods"]) == 2 and data["events"]
    every = run_cli("describe", "broken", "-o", "wide", env=env, columns=80).stdout
    assert "ISOLATION" in every and "FROM" in every and "MESSAGE" in every


# ----- logs of a workload that waits --------------------------------------------------------

HOLD = "import os, time\nwhile not os.path.exists({gate!r}): time.sleep(0.05)\n"


def test_logs_of_a_pending_workload_say_why_and_follow_once_it_starts(
    gpu_server: ServerProcess, tmp_path: Path
) -> None:
    env = gpu_server.env
    gate = tmp_path / "gate"
    script = tmp_path / "hold.py"
    script.write_text(HOLD.format(gate=str(gate)))
    _submit(gpu_server, "hog", "-g", "1", "--", "python", str(script))  # both GPUs
    wait_until(lambda: _workload(gpu_server, "hog")["actualPhase"] == "Running", 90, "hog runs")
    _submit(gpu_server, "next", "-g", "1", "--", "python", "-c", "print('next ran')")
    wait_until(lambda: _workload(gpu_server, "next")["pendingReason"], 60, "a pending reason")

    once = run_cli("logs", "next", env=env)
    assert once.returncode == 0 and once.stdout == "", once
    assert once.stderr.startswith("next is Pending: a gang of 2 pods needs 1 whole GPU")
    assert "`ringleader logs next -f` waits for it to start" in once.stderr

    def follow(name: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
        out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ringleader", "logs", "next", "-f"],
                env=env,
                stdout=stdout,
                stderr=stderr,
            )
        wait_until(lambda: "waiting for it to start" in err.read_text(), 60, "the waiting line")
        return proc, out, err

    stopped, _, err = follow("interrupted")
    stopped.send_signal(signal.SIGINT)  # Ctrl-C while it waits
    assert stopped.wait(timeout=60) == 130
    assert err.read_text().rstrip().endswith("error: interrupted")
    assert "Traceback" not in err.read_text()

    following, out, err = follow("followed")
    gate.write_text("go")  # hog ends: next gets the GPUs, starts, prints, ends
    assert following.wait(timeout=120) == 0, err.read_text()
    # Both pods print at once: the merged log orders them by time, either may be first.
    assert sorted(out.read_text().splitlines()) == [
        "[next-master-0] next ran",
        "[next-worker-0] next ran",
    ]
    assert "next is Pending:" in err.read_text()


def test_a_follow_cut_by_the_server_stopping_says_so(server: ServerProcess, tmp_path: Path) -> None:
    """The server stops under `logs -f`: not a silent exit 0 as if the run had ended."""
    script = tmp_path / "hold.py"
    script.write_text("print('up', flush=True)\n" + HOLD.format(gate=str(tmp_path / "gate")))
    _submit(server, "held", "--", "python", str(script))
    out, err = tmp_path / "out", tmp_path / "err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        follow = subprocess.Popen(
            [sys.executable, "-m", "ringleader", "logs", "held", "-f"],
            env=server.env,
            stdout=stdout,
            stderr=stderr,
        )
    wait_until(lambda: out.read_text().count("up") == 2, 90, "both pods up")
    server.proc.send_signal(signal.SIGTERM)
    assert follow.wait(timeout=60) in (1, 7), err.read_text()
    lines = err.read_text().strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and "fix:" in lines[1], lines
    assert "cannot reach the ringleader server" in lines[0] or "stream ended" in lines[0]

"""The server's reader process (``services/reader_process.py``): calls run in another
interpreter, by name only, their exceptions come back, and the reader never outlives
the server, however either ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ringleader.errors import TooManyRequests
from ringleader.server.services.reader_process import NICE, Reader
from tests.conftest import wait_until

METRICS = "ringleader.server.services.metrics:read_run_metrics"


def gone(pid: int) -> bool:
    """``pid`` ended (reaped, or a zombie waiting for a parent that is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_call_runs_in_another_process_and_its_answer_comes_back(tmp_path: Path) -> None:
    reader = Reader()
    try:
        answer = json.loads(reader.call(METRICS, str(tmp_path), "w-1", None, 10))
        assert (answer["workloadId"], answer["collected"], answer["series"]) == ("w-1", True, [])
        assert reader.pid is not None and reader.pid != os.getpid()
    finally:
        reader.close()


def test_the_reader_yields_the_cpu_to_the_server(tmp_path: Path) -> None:
    """Work a tenant asked for runs at the lowest priority: idle class, and nicer."""
    reader = Reader()
    try:
        reader.call(METRICS, str(tmp_path), "w-1", None, 10)
        assert reader.pid is not None
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, reader.pid) == min(19, ours + NICE)
        if sys.platform == "linux":  # preempted at once by any normal task
            assert os.sched_getscheduler(reader.pid) == os.SCHED_IDLE
    finally:
        reader.close()


def test_only_named_calls_run_and_a_raised_exception_comes_back_as_itself(tmp_path: Path) -> None:
    reader = Reader()
    try:
        with pytest.raises(ValueError, match="not a reader call"):
            reader.call("os:system", "touch /tmp/never")
        assert reader.pid is None  # refused before anything started
        with pytest.raises(TypeError):  # Path(None), raised in the reader
            reader.call(METRICS, None, "w-1", None, 10)
        assert reader.pid is not None  # and the reader goes on serving
        reader.call(METRICS, str(tmp_path), "w-1", None, 10)
    finally:
        reader.close()


def test_a_killed_reader_is_replaced_by_the_next_call(tmp_path: Path) -> None:
    reader = Reader()
    try:
        reader.call(METRICS, str(tmp_path), "w-1", None, 10)
        first = reader.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: reader.pid is None, 30, "the killed reader seen as gone")
        reader.call(METRICS, str(tmp_path), "w-1", None, 10)
        assert reader.pid not in (None, first)
    finally:
        reader.close()


def test_a_reader_dying_mid_call_is_a_429_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = Reader()
    try:
        reader.call(METRICS, str(tmp_path), "w-1", None, 10)
        proc = reader._proc
        assert proc is not None and proc.stdout is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # As if it died after the call was sent: the call meets a closed pipe.
        monkeypatch.setattr(reader, "_started", lambda: proc)
        with pytest.raises(TooManyRequests, match="try again"):
            reader.call(METRICS, str(tmp_path), "w-1", None, 10)
        assert reader.pid is None  # reaped: the next call starts another
    finally:
        reader.close()


def test_closing_ends_the_reader(tmp_path: Path) -> None:
    reader = Reader()
    reader.call(METRICS, str(tmp_path), "w-1", None, 10)
    pid = reader.pid
    assert pid is not None
    reader.close()
    assert gone(pid) and reader.pid is None


def test_the_reader_ends_when_its_server_is_killed_with_sigkill(tmp_path: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from ringleader.server.services.reader_process import READER
            READER.call({METRICS!r}, {str(tmp_path)!r}, "w-1", None, 10)
            print(READER.pid, flush=True)
            time.sleep(600)
        """)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert server.stdout is not None
    reader_pid = int(server.stdout.readline())
    assert not gone(reader_pid)
    server.kill()
    server.wait()
    wait_until(lambda: gone(reader_pid), 30, "the reader gone with its server")

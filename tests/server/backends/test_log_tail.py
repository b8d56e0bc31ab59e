"""``logs?tail=N`` reads a local run's files from their end: the bytes read are the
tail's, not the file's, and the lines are the ones a whole read would give."""

from __future__ import annotations

import io
import random
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from ringleader.hosts import Host
from ringleader.launch.detached import LAUNCH_FILE, LaunchFile, write_json_atomic
from ringleader.launch.plan import LaunchSpec
from ringleader.launch.run_logs import format_log_line
from ringleader.server.backends.local import LocalBackend, logtail
from ringleader.server.backends.local.logtail import BLOCK_BYTES, last_lines, tail_logs


class Counted:
    """What ``logtail`` opened, counting the bytes it read."""

    bytes_read = 0

    def __init__(self, path: Path, mode: str) -> None:
        self.file: io.BufferedReader = open(path, mode)  # noqa: SIM115

    def __enter__(self) -> Counted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.file.close()

    def seek(self, *args: Any) -> int:
        return self.file.seek(*args)

    def read(self, size: int) -> bytes:
        data = self.file.read(size)
        Counted.bytes_read += len(data)
        return data


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> type[Counted]:
    Counted.bytes_read = 0
    monkeypatch.setattr(logtail, "open", Counted, raising=False)
    return Counted


def test_tail_of_a_big_log_reads_a_block_not_the_file(
    tmp_path: Path, counted: type[Counted]
) -> None:
    path = tmp_path / "rank-0.stdout"
    with open(path, "w") as f:
        for i in range(400_000):  # ~10 MB
            f.write(format_log_line(1000.0 + i, f"line {i} " + "x" * 10))
    assert path.stat().st_size > 100 * BLOCK_BYTES
    assert [line.split()[2] for line in last_lines(path, 5)] == [
        str(i) for i in range(399_995, 400_000)
    ]
    assert counted.bytes_read <= BLOCK_BYTES


def test_edges_of_last_lines(tmp_path: Path, counted: type[Counted]) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"")
    assert last_lines(path, 3) == []
    path.write_bytes(b"a\nb\nc")  # no final newline
    assert last_lines(path, 2) == ["b", "c"]
    assert last_lines(path, 10) == ["a", "b", "c"]
    path.write_bytes(b"a\r\nb\n\n")  # only \n ends a line, as the writer wrote them
    assert last_lines(path, 3) == ["a\r", "b", ""]
    path.write_bytes("é\n".encode() * 5 + b"\xff\n")
    assert last_lines(path, 2) == ["é", "\ufffd"]
    path.write_bytes(b"z" * (5 * 1024 * 1024) + b"\nlast\n")  # one 5 MB line, then one
    counted.bytes_read = 0
    assert last_lines(path, 1, block=1024) == ["last"]
    lines = last_lines(path, 2)
    assert lines[-1] == "last" and len(lines[0]) < 5 * 1024 * 1024  # cut, memory bounded
    assert counted.bytes_read < 5 * 1024 * 1024


def test_tail_logs_gives_what_the_backend_s_whole_read_does(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    spec = LaunchSpec(command=["true"], hosts=[Host("localhost", "127.0.0.1", 2)], run_id="rl-t",
                      cwd=str(tmp_path), python="python")  # fmt: skip
    pods = [
        {"name": "t-master-0", "role": "master", "index": 0, "ranks": [0]},
        {"name": "t-worker-0", "role": "worker", "index": 0, "ranks": [1]},
    ]
    run_dir.mkdir()
    write_json_atomic(run_dir / LAUNCH_FILE, LaunchFile(spec=spec, pods=pods).to_json())
    rng = random.Random(5)
    for attempt in (0, 1):
        folder = run_dir / "logs" / f"attempt-{attempt}"
        folder.mkdir(parents=True)
        for name in ("rank-0.stdout", "rank-0.stderr", "rank-1.stdout"):
            t = 100.0 * (attempt + 1)
            with open(folder / name, "w") as f:
                for i in range(rng.randint(0, 300)):
                    t += rng.choice([0.0, 0.001, 0.5])
                    f.write(format_log_line(t, f"{name} {i}") if i % 7 else f"unstamped {i}\n")
    backend = LocalBackend()
    for pod in (None, "t-master-0", "t-worker-0"):
        for n in (1, 5, 50, 10_000):
            whole = list(deque(backend.logs(str(run_dir), pod=pod), maxlen=n))
            assert list(tail_logs(str(run_dir), pod, n)) == whole, (pod, n)

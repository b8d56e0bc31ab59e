"""services.metric_files: the metrics directory read safely, within caps, incrementally
(unit tests; a tenant's attacks on a real server: tests/server/security/test_tenant_files.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ringleader.server.services import metric_files


def _lines(lines: list[bytes]) -> tuple[list[Any], bool]:
    return [line.decode() for line in lines], b"capped" in lines


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    metric_files.CACHE.clear()


def _read(folder: Path, name: str, budget: metric_files.Budget, cap: int = 1 << 20):
    with metric_files.folder(str(folder)) as dir_fd:
        assert dir_fd is not None
        return metric_files.read(dir_fd, str(folder), name, _lines, cap, budget)


def test_a_repeated_poll_reads_only_the_new_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"a\nb\nhalf")
    budget = metric_files.Budget()
    assert _read(tmp_path, "f.jsonl", budget) == (["a", "b"], False)
    assert budget.bytes_left == metric_files.REQUEST_READ_CAP - 8
    with path.open("ab") as f:
        f.write(b"-line\ncapped\n")
    again = metric_files.Budget()
    assert _read(tmp_path, "f.jsonl", again) == (["a", "b", "half-line", "capped"], True)
    assert metric_files.REQUEST_READ_CAP - again.bytes_left == len(b"half-line\ncapped\n")
    path.write_bytes(b"new\n")  # shrank: read afresh
    assert _read(tmp_path, "f.jsonl", metric_files.Budget()) == (["new"], False)


def test_the_request_budget_caps_bytes_and_files_and_says_partial(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(b"x" * 9 + b"\n")
    budget = metric_files.Budget(bytes_left=15, files_left=2)
    assert _read(tmp_path, "f0", budget) == (["x" * 9], False)
    assert _read(tmp_path, "f1", budget) == ([], False) and budget.partial
    assert budget.bytes_left == 0
    assert _read(tmp_path, "f2", budget) == ([], False)  # no file left in this request
    # the next request goes on from the cache: f0 is not read again
    more = metric_files.Budget(bytes_left=100)
    assert _read(tmp_path, "f0", more) == (["x" * 9], False)
    assert _read(tmp_path, "f1", more) == (["x" * 9], False)
    assert more.bytes_left == 100 - 10 and not more.partial


def test_a_files_cap_is_consumed_and_a_runaway_line_skipped(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"y\n" * 10)
    assert _read(tmp_path, "big", metric_files.Budget(), cap=5) == (["y", "y", "y"], False)
    (tmp_path / "line").write_bytes(b"z" * (metric_files.LINE_MAX + 10))
    budget = metric_files.Budget()
    items, _ = _read(tmp_path, "line", budget)
    assert items == ["z" * (metric_files.LINE_MAX + 10)]  # consumed, not waited for
    assert metric_files.REQUEST_READ_CAP - budget.bytes_left == metric_files.LINE_MAX + 10


def test_links_fifos_and_a_linked_directory_are_not_read(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "f").write_bytes(b"secret\n")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "f").symlink_to(real / "f")
    os.mkfifo(tmp_path / "mine" / "fifo")
    assert _read(tmp_path / "mine", "f", metric_files.Budget()) == ([], False)
    assert _read(tmp_path / "mine", "fifo", metric_files.Budget()) == ([], False)
    (tmp_path / "tenant").mkdir()  # a directory someone else can change (an account's)
    (tmp_path / "tenant" / "metrics").symlink_to(real)  # below the trusted prefix: never
    os.chmod(tmp_path / "tenant", 0o777)
    with metric_files.folder(str(tmp_path / "tenant" / "metrics")) as dir_fd:
        assert dir_fd is None


def test_the_cache_holds_at_most_its_capacity() -> None:
    cache = metric_files.FileCache(capacity=10)
    cache.put(("a",), metric_files._Entry(6))
    cache.put(("b",), metric_files._Entry(6))
    assert cache.get(("a",)) is None and cache.get(("b",)) is not None
    cache.put(("c",), metric_files._Entry(11))  # bigger than all of it: not kept
    assert cache.get(("c",)) is None


def test_a_reader_past_the_concurrent_ones_is_refused_at_once_not_queued(tmp_path: Path) -> None:
    """A request thread never waits for a turn to read metrics: one more than
    ``CONCURRENT_READS`` is a 429 at once, and the turn comes back when one ends."""
    import contextlib

    import pytest

    from ringleader.errors import TooManyRequests
    from ringleader.server.services.metric_files import CONCURRENT_READS, turn

    with contextlib.ExitStack() as held:
        for _ in range(CONCURRENT_READS):
            held.enter_context(turn())
        with pytest.raises(TooManyRequests, match="try again"), turn():
            pass
    with turn():  # the turns came back
        pass

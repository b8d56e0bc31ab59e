"""get_logger: rank 0 talks, other ranks only warn, and every line says which rank."""

from __future__ import annotations

import logging

import pytest

from ringleader.runtime import get_logger


def _as_rank(monkeypatch: pytest.MonkeyPatch, rank: int, world: int) -> None:
    for name, value in {
        "RANK": rank,
        "LOCAL_RANK": rank,
        "WORLD_SIZE": world,
        "LOCAL_WORLD_SIZE": world,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": 29500,
    }.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.delenv("RINGLEADER_RANK", raising=False)


def test_non_zero_rank_logs_warnings_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _as_rank(monkeypatch, 1, 2)
    log = get_logger("ringleader.test.quiet")
    log.info("not shown")
    log.warning("shown")
    err = capsys.readouterr().err
    assert "not shown" not in err
    assert "rank 1/2 WARNING ringleader.test.quiet: shown" in err


def test_all_ranks_and_repeated_calls(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _as_rank(monkeypatch, 1, 2)
    get_logger("ringleader.test.loud")
    log = get_logger("ringleader.test.loud", all_ranks=True)
    assert log.level == logging.INFO
    log.info("hello")
    assert capsys.readouterr().err.count("rank 1/2 INFO ringleader.test.loud: hello") == 1


def test_rank_zero_logs_info(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _as_rank(monkeypatch, 0, 2)
    get_logger("ringleader.test.main").info("progress")
    assert "rank 0/2 INFO ringleader.test.main: progress" in capsys.readouterr().err

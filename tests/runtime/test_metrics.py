"""runtime.report: one JSON line per call under ringleader, nothing elsewhere, bounded."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ringleader import runtime
from ringleader.runtime import metrics
from ringleader.runtime.metrics import MAX_SCALARS, METRICS_DIR, METRICS_FILE


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(METRICS_FILE, raising=False)
    monkeypatch.delenv(METRICS_DIR, raising=False)


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_no_env_is_a_no_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runtime.report(1, loss=0.5, samples=32, lr=0.1)
    assert list(tmp_path.iterdir()) == []


def test_appends_one_record_per_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "metrics" / "rank-0.attempt-0.jsonl"  # the last directory is made
    monkeypatch.setenv(METRICS_FILE, str(path))
    runtime.report(1, loss=2.5, samples=32, lr=0.1, epoch=1)
    runtime.report(2, loss=2.0)
    first, second = _records(path)
    assert first["step"] == 1 and first["loss"] == 2.5 and first["samples"] == 32
    assert first["scalars"] == {"lr": 0.1, "epoch": 1.0}
    assert isinstance(first["time"], float) and second["time"] >= first["time"]
    assert second == {"step": 2, "time": second["time"], "loss": 2.0}


def test_dir_and_rank_name_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under mpirun a rank gets the directory only and names its own file."""
    monkeypatch.setenv(METRICS_DIR, str(tmp_path))
    monkeypatch.setenv("RINGLEADER_RANK", "3")
    monkeypatch.setenv("RINGLEADER_RESTART_COUNT", "2")
    runtime.report(7, loss=1.0)
    assert _records(tmp_path / "rank-3.attempt-2.jsonl")[0]["step"] == 7


def test_non_finite_values_are_left_out_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.jsonl"
    monkeypatch.setenv(METRICS_FILE, str(path))
    runtime.report(1, loss=math.nan, grad_norm=math.inf, lr=0.1)
    (record,) = _records(path)
    assert "loss" not in record
    assert record["scalars"] == {"lr": 0.1}
    assert record["nonfinite"] == ["loss", "grad_norm"]


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: runtime.report(-1), "step"),
        (lambda: runtime.report(1.5), "step"),  # type: ignore[arg-type]
        (lambda: runtime.report(True), "step"),
        (lambda: runtime.report(1, loss="0.5"), "loss"),  # type: ignore[arg-type]
        (lambda: runtime.report(1, samples=-3), "samples"),
        (lambda: runtime.report(1, **{"bad-name": 1.0}), "bad-name"),
        (lambda: runtime.report(1, **{"9lives": 1.0}), "9lives"),
        (lambda: runtime.report(1, **{"x" * 65: 1.0}), "x" * 65),
        (lambda: runtime.report(1, time=1.0), "time"),
        (lambda: runtime.report(1, lr=None), "lr"),  # type: ignore[arg-type]
        (lambda: runtime.report(1, **{f"s{i}": 1.0 for i in range(MAX_SCALARS + 1)}), "scalars"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(call, named: str) -> None:  # type: ignore[no-untyped-def]
    """Raised with or without a metrics file: a bug shows where the code is tried."""
    with pytest.raises(ValueError, match=f"^{named}: "):
        call()


def test_names_within_the_pattern_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.jsonl"
    monkeypatch.setenv(METRICS_FILE, str(path))
    names = {"a" + "b" * 63: 1.0, "_x.y_2": 2.0, **{f"s{i}": 0.0 for i in range(MAX_SCALARS - 2)}}
    runtime.report(1, **names)
    assert _records(path)[0]["scalars"] == names


def test_size_cap_drops_and_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.jsonl"
    monkeypatch.setenv(METRICS_FILE, str(path))
    monkeypatch.setattr(metrics, "MAX_FILE_BYTES", 200)
    for step in range(20):
        runtime.report(step, loss=1.0)
    records = _records(path)
    assert records[-1] == {"capped": True}
    kept = len(records) - 1
    assert 0 < kept < 20
    assert metrics.dropped() == 20 - kept
    assert path.stat().st_size < 200 + 50  # the cap plus the one marker line


def test_unwritable_place_warns_once_and_never_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rank whose host lacks the run dir (an SSH node) trains on without metrics."""
    monkeypatch.setenv(METRICS_FILE, str(tmp_path / "absent" / "metrics" / "r.jsonl"))
    runtime.report(1, loss=1.0)
    runtime.report(2, loss=1.0)
    err = capsys.readouterr().err
    assert err.count("metrics are not recorded") == 1
    assert not (tmp_path / "absent").exists()


def test_a_directory_made_meanwhile_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every rank makes the metrics dir on its first report: the losers of that race record."""
    folder = tmp_path / "metrics"
    monkeypatch.setenv(METRICS_FILE, str(folder / "rank-1.attempt-0.jsonl"))
    real_isdir = metrics.os.path.isdir

    def made_by_another_rank(path: str) -> bool:
        if path == str(folder):
            folder.mkdir(exist_ok=True)  # another rank made it after we looked
            return False
        return real_isdir(path)

    monkeypatch.setattr(metrics.os.path, "isdir", made_by_another_rank)
    runtime.report(1, loss=1.0)
    monkeypatch.undo()
    assert _records(folder / "rank-1.attempt-0.jsonl")[0]["step"] == 1

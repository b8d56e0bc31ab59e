"""The undo log the scheduler's trials stand on: exact restores and versions."""

from __future__ import annotations

from ringleader.sched.journal import Journal


def test_rollback_restores_sets_rows_records_and_new_keys() -> None:
    journal = Journal()
    row = [0.1, 0.2, 0.3]
    table: dict[str, int] = {"a": 1}
    undone: list[str] = []
    mark = journal.mark()
    journal.set(table, "a", 2)
    journal.set(table, "b", 3)  # a key the log created
    journal.save(row)
    row[0] += 0.7
    row[2] = 9.0
    journal.record(lambda: undone.append("x"))
    journal.rollback(mark)
    assert table == {"a": 1}
    assert row == [0.1, 0.2, 0.3]  # the very floats, not recomputed
    assert undone == ["x"]
    assert journal.mark() == mark


def test_a_version_names_one_state() -> None:
    """Rolling back returns to the version the state had then; a new change
    after it gets a version never seen, and forgetting keeps the version."""
    journal = Journal()
    row = [1.0]
    start = journal.version
    journal.save(row)
    row[0] = 2.0
    before_trial, mark = journal.version, journal.mark()
    journal.save(row)
    row[0] = 3.0
    during_trial = journal.version
    journal.rollback(mark)
    assert journal.version == before_trial != during_trial != start
    journal.save(row)
    row[0] = 4.0
    assert journal.version not in (start, before_trial, during_trial)
    settled = journal.version
    journal.forget()
    assert journal.version == settled
    assert journal.mark() == 0
    journal.save(row)
    row[0] = 5.0
    journal.rollback(0)
    assert row == [4.0]
    assert journal.version == settled

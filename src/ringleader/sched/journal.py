"""An undo log for the scheduler's mutable state, so trials cost no copies.

Nomenclature: a *mark* is the log's length at some moment; *rolling back*
to it restores every value changed since, in reverse order.  A *version*
names one state: each entry gets a stamp never used before, and the version
is the stamp of the newest entry still in the log, so a state reached again
by rolling back has the version it had then, and caches of things derived
from state (pending reasons) survive a trial that was undone.

Invariants: values are restored, not recomputed, so float sums come back
bit for bit; a dict key the log created is deleted again on rollback; a
recorded undo runs in its turn, like any other entry.  The entries below
one never change while it is in the log, so one stamp means one state.
``forget`` drops the whole log, and is only for when no mark is held.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_ABSENT = object()
_UNDO = object()
_ROW = object()


class Journal:
    __slots__ = ("_base", "_log", "_stamp")

    def __init__(self) -> None:
        # (container, key, old value, stamp); key _ROW: old is a copy of the
        # whole list; container _UNDO: key is a function that undoes.
        self._log: list[tuple[Any, Any, Any, int]] = []
        self._stamp = 0
        self._base = 0  # the version when the log was last forgotten

    def set(self, container: Any, key: Any, value: Any) -> None:
        """``container[key] = value``, remembering the old value (or its absence)."""
        old = container.get(key, _ABSENT) if isinstance(container, dict) else container[key]
        self._stamp += 1
        self._log.append((container, key, old, self._stamp))
        container[key] = value

    def delete(self, container: dict[Any, Any], key: Any) -> None:
        """``del container[key]``, remembering the value (a rollback puts it back)."""
        self._stamp += 1
        self._log.append((container, key, container.pop(key), self._stamp))

    def save(self, row: list[Any]) -> None:
        """Remember a whole list before the caller changes its items in place:
        one entry for a row of changes, where ``set`` would log one each."""
        self._stamp += 1
        self._log.append((row, _ROW, row.copy(), self._stamp))

    def record(self, undo: Callable[[], None]) -> None:
        """Remember a change that is not a single assignment (a sorted insert)."""
        self._stamp += 1
        self._log.append((_UNDO, undo, None, self._stamp))

    def mark(self) -> int:
        return len(self._log)

    def rollback(self, mark: int) -> None:
        log = self._log
        if len(log) <= mark:
            return
        for container, key, old, _ in reversed(log[mark:]):
            if key is _ROW:
                container[:] = old
            elif container is _UNDO:
                key()
            elif old is _ABSENT:
                del container[key]
            else:
                container[key] = old
        del log[mark:]

    def forget(self) -> None:
        """Drop the log: the state as it stands can no longer be rolled back.

        Only where no mark is held (between trials, once a placement is
        final): a cycle places thousands of pods and never undoes one it
        kept, so their entries (and the row copies in them) would only pile
        up for the garbage collector to walk, again and again.  The version
        stays what it was.
        """
        if self._log:
            self._base = self._log[-1][3]
            self._log.clear()

    @property
    def version(self) -> int:
        return self._log[-1][3] if self._log else self._base

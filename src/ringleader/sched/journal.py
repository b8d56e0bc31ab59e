"""An undo log for the scheduler's mutable state, so trials cost no copies.

Nomenclature: a *mark* is the log's length at some moment; *rolling back*
to it restores every value changed since, in reverse order.  A *version*
names one state: it changes whenever the state does (a set, or a rollback
that undid something), so it can key caches of things derived from state.

Invariants: values are restored, not recomputed, so float sums come back
bit for bit; a dict key the log created is deleted again on rollback; a
recorded undo runs in its turn, like any other entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_ABSENT = object()
_UNDO = object()


class Journal:
    def __init__(self) -> None:
        self._log: list[tuple[Any, Any, Any]] = []
        self._epoch = 0

    def set(self, container: Any, key: Any, value: Any) -> None:
        """``container[key] = value``, remembering the old value (or its absence)."""
        old = container.get(key, _ABSENT) if isinstance(container, dict) else container[key]
        self._log.append((container, key, old))
        container[key] = value

    def record(self, undo: Callable[[], None]) -> None:
        """Remember a change that is not a single assignment (a sorted insert)."""
        self._log.append((_UNDO, undo, None))

    def mark(self) -> int:
        return len(self._log)

    def rollback(self, mark: int) -> None:
        if len(self._log) > mark:
            self._epoch += 1
        while len(self._log) > mark:
            container, key, old = self._log.pop()
            if container is _UNDO:
                key()
            elif old is _ABSENT:
                del container[key]
            else:
                container[key] = old

    @property
    def version(self) -> tuple[int, int]:
        return (len(self._log), self._epoch)

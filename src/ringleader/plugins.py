"""A registry of named plug-ins whose built-ins are imported on first use.

Frameworks (``launch.frameworks``) and placement policies (``sched.policies``)
keep one each: adding one is a module plus a line in its registry's built-ins,
or ``register`` from a plug-in.  Standard library only, because ``launch``
and every MPI rank import the frameworks' registry.

Invariants: the built-ins come first in ``names()`` whatever was registered
before they were loaded; a name is registered once (``register`` refuses a
taken one; the caller checks its own naming rules first).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class LazyRegistry(Generic[T]):
    """Plug-ins by name; ``built_in``: name -> ``"module:attribute"``, loaded lazily."""

    def __init__(self, kind: str, built_in: dict[str, str]) -> None:
        self.kind = kind  # "framework", "placement policy": for error messages
        self.built_in = built_in
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        """Register ``item`` as ``name``; a name already taken is a ValueError."""
        self._load()
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = item
        return item

    def remove(self, name: str) -> None:
        """Forget ``name`` (a plug-in's tests clean up after themselves)."""
        self._items.pop(name, None)

    def names(self) -> list[str]:
        """Registered names, built-ins first."""
        self._load()
        return list(self._items)

    def values(self) -> Iterator[T]:
        self._load()
        return iter(list(self._items.values()))

    def find(self, name: str) -> T | None:
        """The plug-in ``name``, or None.  A built-in name imports its own module only:
        a launch of one framework does not import the others' (its fixed cost);
        another name loads every built-in first, so a plug-in never hides one."""
        found = self._items.get(name)
        if found is None and name in self.built_in:
            module, _, attribute = self.built_in[name].partition(":")
            found = self._items[name] = getattr(importlib.import_module(module), attribute)
        elif found is None:
            self._load()
            found = self._items.get(name)
        return found

    def _load(self) -> None:
        if self._items.keys() >= self.built_in.keys():
            return
        for name, target in self.built_in.items():
            if name not in self._items:
                module, _, attribute = target.partition(":")
                self._items[name] = getattr(importlib.import_module(module), attribute)
        ordered = {n: self._items[n] for n in self.built_in} | self._items
        self._items.clear()
        self._items.update(ordered)

"""The plug-in registry: built-ins load lazily, one by one where a name asks for one."""

from __future__ import annotations

import pytest

from ringleader.plugins import LazyRegistry


def _registry() -> LazyRegistry[object]:
    # "broken" names a module that does not exist: importing it would raise.
    return LazyRegistry("thing", {"dumps": "json:dumps", "broken": "no_such_module_xyz:x"})


def test_a_built_in_name_imports_its_own_module_only() -> None:
    registry = _registry()
    import json

    assert registry.find("dumps") is json.dumps  # "broken" was never imported


def test_another_name_loads_every_built_in_first() -> None:
    registry = _registry()
    with pytest.raises(ModuleNotFoundError):
        registry.find("mine")  # a plug-in name: every built-in is loaded to look


def test_names_keep_built_ins_first_after_a_lone_find() -> None:
    registry = LazyRegistry("thing", {"a": "json:dumps", "b": "json:loads"})
    registry.find("b")
    registry.add("c", object())
    assert registry.names() == ["a", "b", "c"]

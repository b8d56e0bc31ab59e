"""Which of Run:ai's ignored fields a submitted body gave, and the Warning that names them.

Why apart from ``runai_fields``: that module is the schema (Run:ai's blocks and
the mixins ``spec.py``'s models take, each with its ``runai_ignored`` and
``runai_defaults``); this one is what a submission does with a validated spec,
walking any model by those two class attributes alone, so it depends on no
block of the schema.  ``runai_fields`` re-exports its three names.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

MAX_NAMED = 100  # ignored fields named in the Warning event; the rest are counted


def ignored_fields(model: BaseModel, path: str = "") -> Iterator[str]:
    """The wire paths (``spec.tty``, ``spec.environmentVariables[0].secret``) of the
    ignored fields ``model`` was given, depth first in the body's order."""
    kind = type(model)
    ignored: frozenset[str] = getattr(kind, "runai_ignored", frozenset())
    defaults: dict[str, Any] = getattr(kind, "runai_defaults", {})
    for name, info in kind.model_fields.items():
        if name not in model.model_fields_set:
            continue
        value = getattr(model, name)
        where = f"{path}.{info.alias or name}" if path else (info.alias or name)
        if name in ignored:
            if value not in (None, [], {}) and value != defaults.get(name):
                yield where
        elif isinstance(value, BaseModel):
            yield from ignored_fields(value, where)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from ignored_fields(item, f"{where}[{index}]")


def ignored_message(paths: list[str]) -> str:
    """The Warning event's text: the fields, at most ``MAX_NAMED`` of them by name."""
    named = ", ".join(paths[:MAX_NAMED])
    more = f" and {len(paths) - MAX_NAMED} more" if len(paths) > MAX_NAMED else ""
    return (
        f"ignored (they mean nothing without Kubernetes here): {named}{more}; "
        "the workload runs without them"
    )

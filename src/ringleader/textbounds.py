"""Bounds on the text (and JSON) a request may carry: the input checks of ``spec.py``
and of the Run:ai fields ringleader accepts without acting on (``runai_fields.py``).

Invariants:
- a checked string is storable: no NUL (PostgreSQL text cannot hold it, nor can
  a process's argv or environment) and no lone UTF-16 surrogate (no UTF-8
  encoder writes it, so every response carrying it would fail);
- every check guards input only: under the ``STORED`` validation context (a
  spec read back from the database) it lets the value through, so a row
  stored before a bound existed is still shown, never a 500.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationInfo

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_unstorable(text: str) -> str:
    """``text`` with NUL and lone surrogates as U+FFFD (the replacement character),
    for text that must be kept rather than refused (a tenant's error message)."""
    return _UNSTORABLE.sub("\ufffd", text)


def check_text(text: str) -> str:
    """``text`` if it can be stored and sent back: no NUL, no lone surrogate."""
    bad = _UNSTORABLE.search(text)
    if bad is not None:
        what = "a NUL character" if bad.group() == "\x00" else "a lone UTF-16 surrogate"
        raise ValueError(f"contains {what} (at character {bad.start()}), which cannot be stored")
    return text


# The validation context of a spec read back from the database (``from_stored``).
STORED = {"stored": True}


def stored(info: ValidationInfo | None) -> bool:
    """True when validating what was stored, which the input checks let through."""
    return info is not None and isinstance(info.context, dict) and bool(info.context.get("stored"))


def bounded(max_chars: int, *, storable: bool = True) -> AfterValidator:
    """An input check: at most ``max_chars`` characters, and ``check_text`` if ``storable``."""

    def check(text: str, info: ValidationInfo) -> str:
        if stored(info):
            return text
        if len(text) > max_chars:
            raise ValueError(f"at most {max_chars} characters; this one has {len(text)}")
        if storable:
            return check_text(text)
        surrogate = _SURROGATE.search(text)  # no query or response could carry it
        if surrogate is not None:
            raise ValueError(f"contains a lone UTF-16 surrogate (at character {surrogate.start()})")
        return text

    return AfterValidator(check)


def text(max_chars: int, *, storable: bool = True) -> Any:
    """A string type of at most ``max_chars`` characters, storable unless told."""
    return Annotated[
        str,
        Field(json_schema_extra={"maxLength": max_chars}),
        bounded(max_chars, storable=storable),
    ]


def at_most(max_items: int) -> AfterValidator:
    """An input check on a list: at most ``max_items`` items."""

    def check(items: list[Any], info: ValidationInfo) -> list[Any]:
        if len(items) > max_items and not stored(info):
            raise ValueError(f"at most {max_items} items; this one has {len(items)}")
        return items

    return AfterValidator(check)


def json_value(max_depth: int, max_nodes: int, max_chars: int) -> AfterValidator:
    """An input check on free-form JSON (a block ringleader stores but never reads):
    nested at most ``max_depth`` deep, at most ``max_nodes`` values in all, each string
    (keys too) at most ``max_chars`` and storable, every number finite."""

    def check(value: Any, info: ValidationInfo) -> Any:
        if stored(info):
            return value
        nodes = 0
        pending: list[tuple[Any, int]] = [(value, 1)]
        while pending:
            item, depth = pending.pop()
            nodes += 1
            if nodes > max_nodes:
                raise ValueError(f"at most {max_nodes} values in all")
            if depth > max_depth:
                raise ValueError(f"nested at most {max_depth} deep")
            if isinstance(item, str):
                bounded_text(item, max_chars)
            elif isinstance(item, float) and not math.isfinite(item):
                raise ValueError("numbers must be finite")
            elif isinstance(item, dict):
                for key, inner in item.items():
                    bounded_text(str(key), max_chars)
                    pending.append((inner, depth + 1))
            elif isinstance(item, list):
                pending.extend((inner, depth + 1) for inner in item)
        return value

    return AfterValidator(check)


def bounded_text(value: str, max_chars: int) -> str:
    if len(value) > max_chars:
        raise ValueError(f"a string of at most {max_chars} characters; this one has {len(value)}")
    return check_text(value)

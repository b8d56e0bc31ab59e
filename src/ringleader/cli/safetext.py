"""Tenant-written text made safe to print on a terminal.

Why: a workload writes its logs and its error file, and through them its phase
message and events.  A terminal obeys the control characters it is sent: ESC
starts sequences that retitle the window (``ESC ] 0 ; ... BEL``), clear the
screen (``ESC [ 2 J``), move the cursor to forge what is shown, and in some
terminals answer back or write files.  Printed raw, that text lets a tenant act
on an admin's terminal.

Invariants:
- ``visible`` leaves every printable character and ``\\n`` and ``\\t`` as they
  are, and turns each other control character into printable text that names
  it: C0 in caret notation (ESC ``^[``, BEL ``^G``, CR ``^M``, NUL ``^@``), DEL
  ``^?``, C1 (U+0080 to U+009F, which some terminals take as ESC sequences) as
  ``\\x9b``; nothing is dropped, so a reader sees what was there;
- ``visible_data`` does it to every string (keys too) of an API object, so a
  command prints the object it was given, only safe;
- what a command prints for scripts stays exact: ``logs`` into a pipe or a
  file, ``-o json`` (JSON escapes control characters) and ``-o yaml``
  (double-quoted escapes), and ``--raw`` where a person asks for it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

KEPT = frozenset({"\t", "\n"})
# str.translate's table: code point -> its visible form.
_VISIBLE: dict[int, str] = {
    **{code: f"^{chr(code + 64)}" for code in range(0x20) if chr(code) not in KEPT},
    0x7F: "^?",
    **{code: f"\\x{code:02x}" for code in range(0x80, 0xA0)},
}
T = TypeVar("T")


def visible(text: str) -> str:
    """``text`` with its control characters (all but newline and tab) made visible."""
    return text.translate(_VISIBLE)


def visible_data(value: T) -> T:
    """``value`` (a model, a dict, a list, a string...) with ``visible`` applied to each
    of its strings; other values as they are.  A model comes back as a copy of its
    own type (not validated again: only its text changed)."""
    return _visible(value)  # type: ignore[no-any-return]


def _visible(value: Any) -> Any:
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        return value.model_copy(update={name: _visible(getattr(value, name)) for name in fields})
    if isinstance(value, dict):
        return {_visible(key): _visible(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_visible(item) for item in value)
    return value

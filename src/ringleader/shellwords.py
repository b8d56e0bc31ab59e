"""Splitting a command into words as ``shlex.split`` does (POSIX mode, no
comments), in linear time: the one splitter of the spec check, the CLI and
the server's planning.

Why not shlex itself: shlex builds each word one character at a time with
``self.token = self.token + c``, which copies the word so far at every
character, quadratic in a word's length (a 1 MB word: tens of seconds).  Here
each segment (a run of plain characters, a quoted string, an escape, a run of
spaces) is one regular-expression match at the current position; every
alternative starts with a different character and its quantifiers are
possessive (no backtracking), so every character is looked at a bounded
number of times, and a word is joined once.
"""

from __future__ import annotations

import re

_SEGMENT = re.compile(
    r"(?P<space>[ \t\r\n]++)"
    r"|(?P<plain>[^ \t\r\n'\"\\]++)"
    r"|'(?P<single>[^']*+)'"
    r"|\"(?P<double>(?:[^\"\\]++|\\.)*+)\""
    r"|\\(?P<escaped>.)",
    re.DOTALL,
)
_DOUBLE_QUOTED_ESCAPE = re.compile(r'\\(["\\])')  # in "...", only \" and \\ are escapes


def split_command(text: str) -> list[str]:
    """``text`` split into words as ``shlex.split`` (POSIX mode, no comments) does.

    ValueError for what cannot be split: a quote never closed, a trailing backslash.
    """
    words: list[str] = []
    word: list[str] | None = None
    pos, end = 0, len(text)
    while pos < end:
        match = _SEGMENT.match(text, pos)
        if match is None:
            if text[pos] == "\\":
                raise ValueError(f"the backslash at character {pos} escapes nothing")
            raise ValueError(f"the {text[pos]} at character {pos} is never closed")
        kind, pos = match.lastgroup, match.end()
        if kind == "space":
            if word is not None:
                words.append("".join(word))
                word = None
            continue
        value = match.group(kind)
        if kind == "double":
            value = _DOUBLE_QUOTED_ESCAPE.sub(r"\1", value)
        if word is None:
            word = []
        word.append(value)
    if word is not None:
        words.append("".join(word))
    return words

"""The manual's code blocks and the ``ringleader`` command lines in them.

A block is a fenced block of a markdown page.  Shell blocks (no language,
``bash``, ``sh``, ``console``, ``shell``) hold commands; ``text`` blocks hold
output and intentional mistakes.  A block right after ``<!-- doctest -->`` is
run as it is printed (``<!-- doctest: server -->``: with a server running in
its home), the others are only parsed against the CLI.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_LANGUAGES = {"", "bash", "sh", "console", "shell"}
_FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w-]*)")
_DOCTEST = re.compile(r"<!--\s*doctest(?::\s*([\w-]+))?\s*-->")
_SEPARATORS = {"&&", "||", "|", ";", "&"}
# Words that run the command after them (their own options skipped): salloc -N 2 ringleader ...
_WRAPPERS = {"sudo", "salloc", "srun", "env", "time", "nohup", "exec"}


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text, and its doctest mark."""

    page: Path
    line: int  # the fence's line, 1-based
    language: str
    text: str
    doctest: str | None  # None: not run; "" run as is; "server": with a server

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """The README and every page of the docs site."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of one page, in order."""
    found: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    mark: str | None = None
    while i < len(lines):
        doctest = _DOCTEST.search(lines[i])
        if doctest:
            mark = doctest.group(1) or ""
            i += 1
            continue
        fence = _FENCE.match(lines[i])
        if not fence:
            if lines[i].strip():
                mark = None  # a mark applies to the block right after it
            i += 1
            continue
        indent, ticks, language = fence.groups()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(ticks):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        found.append(Block(page, i + 1, language.lower(), "\n".join(body), mark))
        mark = None
        i = j + 1
    return found


def shell_lines(text: str) -> list[str]:
    """A block's command lines: continuations joined, prompts dropped."""
    joined: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("$ "):
            line = line[2:]
        if pending:
            line = line.lstrip()
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    return [line for line in joined if line.strip()]


def ringleader_commands(line: str) -> list[list[str]]:
    """The argument lists of each ``ringleader`` command in a shell line (none when
    the line is output or not shell: it does not split, or names no command)."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
    except ValueError:
        return []
    commands: list[list[str]] = []
    segment: list[str] = []
    for word in [*words, ";"]:
        if word in _SEPARATORS:
            args = _after_ringleader(segment)
            if args is not None:
                commands.append(args)
            segment = []
        else:
            segment.append(word)
    return commands


def _after_ringleader(words: list[str]) -> list[str] | None:
    """The arguments of ``ringleader`` when the segment runs it (directly, after
    VAR=value words, or after a wrapper such as ``sudo`` or ``salloc -N 2``)."""
    i = 0
    while i < len(words) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[i]):
        i += 1
    if i < len(words) and words[i] in _WRAPPERS:
        rest = words[i + 1 :]
        for k, word in enumerate(rest):
            if _is_ringleader(word):
                return [w for w in rest[k + 1 :] if w != "..."]
        return None
    if i < len(words) and _is_ringleader(words[i]):
        return [w for w in words[i + 1 :] if w != "..."]
    return None


def _is_ringleader(word: str) -> bool:
    return word == "ringleader" or word.endswith("/bin/ringleader")

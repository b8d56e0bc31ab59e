"""Each rank's lines rebuilt from what ``mpirun --tag-output`` writes.

mpirun tags every *read* of a rank's pipe, not every line: it puts
``[1,R]<stdout>:`` before each chunk it read (at most 4 KiB, often 2 KiB)
and after each newline inside one.  A chunk that does not end a line is
followed on the same output line by the next chunk's tag, which may be
another rank's:

    [1,0]<stdout>:part of rank 0's line[1,1]<stdout>:a whole line of rank 1
    [1,1]<stdout>:xxxx...2048 bytes...[1,1]<stdout>:...the rest of it

Nomenclature:
- *segment*: the text after one tag, up to the next tag or the end of the
  output line.  Every segment but an output line's last is part of a line
  that goes on; the last one ends its rank's line.
- *piece*: what the agent forwarded of one of mpirun's output lines: the
  whole line, or (over ``LINE_CAP``) a part of it ending in ``SPLIT_MARK``;
  the next piece then goes on with the same segment, and may even start in
  the middle of a tag (kept back as ``carry``).

Invariants: a rank's text is never attributed to another rank or to mpirun;
what is held back per rank is bounded (``cap``: a longer run of text without
a newline goes out in pieces marked ``SPLIT_MARK``, as the agent does).
Pure: no I/O, one instance per mpirun output stream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ringleader.launch.protocol import LINE_CAP, SPLIT_MARK

MPIRUN = -1  # the owner of mpirun's own lines (LAUNCHER_RANK)
_TAG = re.compile(r"\[\d+,(\d+)\]<(stdout|stderr|stddiag)>:")
# The start of a tag the agent's split may have cut: "[", "[1", "[1,2]<std" ...
_TAG_START = re.compile(r"\[\d*(?:,\d*(?:\](?:<[a-z]{0,7})?)?)?$")
_LONGEST_TAG = 40  # "[1,RANK]<stddiag>:" with a very large job id and rank


def agent_split(piece: str, cap: int = LINE_CAP) -> tuple[str, bool]:
    """``(text, cut)``: whether the agent cut this piece from a longer line.

    A piece the agent cut is ``cap`` bytes (less at most 3, to end on a whole
    UTF-8 character) plus ``SPLIT_MARK``; a rank's own marked piece (from
    ``mpi_rank``) is a whole line of mpirun's and far shorter, so the two
    never look alike.
    """
    if not piece.endswith(SPLIT_MARK):
        return piece, False
    text = piece[: -len(SPLIT_MARK)]
    if len(text.encode("utf-8", "surrogatepass")) > cap - len(SPLIT_MARK):
        return text, True
    return piece, False


@dataclass(frozen=True)
class RankLine:
    """One whole line of a rank (``MPIRUN`` for mpirun's own words)."""

    rank: int
    stream: str  # "stdout" | "stderr"
    text: str


@dataclass
class TaggedStream:
    """Rebuilds rank lines from one of mpirun's output streams (see the module doc)."""

    world_size: int
    cap: int = LINE_CAP
    _partial: dict[tuple[int, str], list[str]] = field(default_factory=dict)
    _sizes: dict[tuple[int, str], int] = field(default_factory=dict)
    _current: tuple[int, str] | None = None  # whose segment the next piece goes on with
    _carry: str = ""

    def feed(self, piece: str, stream: str) -> list[RankLine]:
        """One piece the agent forwarded from mpirun's ``stream`` -> the lines it completes."""
        text, cut = agent_split(self._carry + piece, self.cap)
        self._carry = ""
        if cut:  # keep back a tag the cut may have halved
            start = text.rfind("[", max(0, len(text) - _LONGEST_TAG))
            if start >= 0 and _TAG_START.fullmatch(text[start:]):
                text, self._carry = text[:start], text[start:]
        out: list[RankLine] = []
        owner, position = self._current, 0
        if owner is None:
            owner = (MPIRUN, stream)
        for match in _TAG.finditer(text):
            rank = int(match.group(1))
            if rank >= self.world_size:  # not mpirun's tag: a rank printed something like it
                continue
            self._add(owner, text[position : match.start()], out)
            owner = (rank, "stdout" if match.group(2) == "stdout" else "stderr")
            position = match.end()
        self._add(owner, text[position:], out)
        if cut:
            self._current = owner
        else:
            self._current = None
            out.append(self._take(owner))
        return out

    def flush(self) -> list[RankLine]:
        """What is left without a newline (the end of an attempt)."""
        owners = [key for key, parts in self._partial.items() if parts]
        lines = [self._take(owner) for owner in owners]
        if self._carry:
            lines.append(RankLine(MPIRUN, "stderr", self._carry))
        self._partial.clear()
        self._sizes.clear()
        self._current, self._carry = None, ""
        return lines

    def _add(self, owner: tuple[int, str], text: str, out: list[RankLine]) -> None:
        if not text:
            return
        self._partial.setdefault(owner, []).append(text)
        self._sizes[owner] = self._sizes.get(owner, 0) + len(text)
        if self._sizes[owner] > self.cap:  # bounded: a long run goes out in marked pieces
            whole = "".join(self._partial.pop(owner))
            self._sizes.pop(owner)
            while len(whole) > self.cap:
                out.append(RankLine(owner[0], owner[1], whole[: self.cap] + SPLIT_MARK))
                whole = whole[self.cap :]
            if whole:
                self._partial[owner], self._sizes[owner] = [whole], len(whole)

    def _take(self, owner: tuple[int, str]) -> RankLine:
        self._sizes.pop(owner, None)
        return RankLine(owner[0], owner[1], "".join(self._partial.pop(owner, [])))

"""A rank's output, forwarded one whole line at a time (the agent's, and mpi_rank's).

Invariants: a partial line waits for its newline or for the stream to close,
but never past ``LINE_CAP`` bytes: a longer line goes on in marked pieces
(``SPLIT_MARK``), each ending on a UTF-8 character boundary where the bytes
allow it; the work is linear in the bytes however long the line. Standard
library only: the agent imports this module and must start fast.
"""

from __future__ import annotations

import os

from ringleader.launch.protocol import LINE_CAP, SPLIT_MARK

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO


class LineSplitter:
    """Bytes in, line pieces out; holds at most ``cap`` bytes of an unfinished line.

    Linear: each input byte is searched for a newline once (plus one byte of
    look-ahead per piece) and copied a fixed number of times (into the pending
    buffer, out as its piece), however long the line; nothing rescans what is
    held, so a line without a newline costs no more per byte than short ones.
    A piece cut at the cap comes with ``split=True`` and ends on a UTF-8
    character boundary where the bytes allow it: no character is torn in two.
    """

    __slots__ = ("cap", "pending")

    def __init__(self, cap: int = LINE_CAP) -> None:
        if cap < 4:
            raise ValueError("cap must be at least 4 bytes (one UTF-8 character)")
        self.cap = cap
        self.pending = bytearray()

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        """The pieces ``data`` completes, as ``(bytes, split)``; the rest is kept."""
        out: list[tuple[bytes, bool]] = []
        pending, cap, view = self.pending, self.cap, memoryview(data)
        pos, end = 0, len(data)
        while pos < end:
            room = cap - len(pending)
            window = min(end, pos + room + 1)  # a newline right after a full piece: still whole
            nl = data.find(b"\n", pos, window)
            if nl >= 0:
                if pending:
                    pending += view[pos:nl]
                    line = bytes(pending)
                    pending.clear()
                else:
                    line = data[pos:nl]
                out.append((line[:-1] if line.endswith(b"\r") else line, False))
                pos = nl + 1
            elif window - pos > room:  # more than a piece's worth without a newline
                pending += view[pos : pos + room]
                pos += room
                out.append(self._cut())
            else:
                pending += view[pos:end]
                pos = end
        return out

    def _cut(self) -> tuple[bytes, bool]:
        """The full pending buffer as one split piece, less a torn last character."""
        pending = self.pending
        keep = _utf8_boundary(pending)
        piece = bytes(pending[:keep])
        del pending[:keep]  # at most 3 bytes stay: the start of the torn character
        return piece, True

    def close(self) -> list[tuple[bytes, bool]]:
        """What is left at the end of the stream: a last line without its newline."""
        if not self.pending:
            return []
        line = bytes(self.pending)
        self.pending.clear()
        return [(line[:-1] if line.endswith(b"\r") else line, False)]


def _utf8_boundary(data: bytearray) -> int:
    """Where to cut ``data`` so that its last UTF-8 character stays whole (len if it is)."""
    end = len(data)
    start = end - 1
    while start > end - 4 and start > 0 and data[start] & 0xC0 == 0x80:
        start -= 1  # back over continuation bytes to the character's first byte
    lead = data[start]
    if lead < 0xC0:  # ASCII, or a stray continuation byte: nothing to keep whole
        return end
    size = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    return start if start + size > end and start > 0 else end  # torn: cut before it


def piece_text(piece: bytes, split: bool) -> str:
    """A piece as the text forwarded: decoded, with SPLIT_MARK when the line goes on."""
    text = piece.decode("utf-8", "replace")
    return text + SPLIT_MARK if split else text


def forward_lines(stream: IO[bytes], emit: Callable[[str], None], cap: int = LINE_CAP) -> None:
    """Emit whole lines from ``stream`` (a trailing partial one at EOF too).

    A line longer than ``cap`` bytes goes out in pieces of at most ``cap``
    bytes as it arrives, each but the last marked with SPLIT_MARK: a rank
    that never writes a newline costs bounded memory and linear work.
    """
    splitter = LineSplitter(cap)
    fd = stream.fileno()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            break
        for piece, split in splitter.feed(chunk):
            emit(piece_text(piece, split))
    for piece, split in splitter.close():
        emit(piece_text(piece, split))
    stream.close()

"""Reading a run's metrics directory for ``GET .../metrics``: safely, bounded, incrementally.

Why: the directory is the workload's (its account owns it when it runs as one)
and the server reading it is root.  It may hold anything the tenant put there: a
link or a swapped directory pointing at another project's records, FIFOs, hard
links, hundreds of files of tens of megabytes each.  A poll every few seconds
must not re-read and re-parse all of that every time.

How:

- the directory is opened once per request with ``tenantfs.open_dir``
  (from its deepest trusted ancestor, no link followed on the way) and every
  file in it through that descriptor (``open_in``: a regular file with one name,
  the directory owner's or ours): a rename or swap of the directory meanwhile
  changes nothing read;
- caps per request (``Budget``): at most ``MAX_FILES`` files, ``MAX_ENTRIES``
  directory entries looked at, and ``REQUEST_READ_CAP`` bytes read; what is left
  is read by the next request (the answer says ``partial``);
- a file's parsed records are cached by (directory, name, device, inode): a
  repeated poll reads only the bytes after the cached offset (only whole lines
  are consumed).  A file that shrank or was replaced is read afresh.  The cache
  holds at most ``CACHE_BYTES`` of consumed file bytes and parsed records, each
  counted at ``ITEM_BYTES`` (least recently used go);
- at most ``CONCURRENT_READS`` requests read at once (``turn``); one more gets a
  429 at once (the route runs in the server's thread pool, off the event loop: it
  never waits there for a turn, so reads of metrics cannot fill the pool);
- all of this runs in the server's reader process (``reader_process``), where the
  cache lives: the parsing holds that process's interpreter lock, not the server's.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ringleader import tenantfs
from ringleader.errors import TooManyRequests

MAX_FILES = 512
MAX_ENTRIES = 8 * MAX_FILES
REQUEST_READ_CAP = 4 * 1024 * 1024  # parsed per request: each answer stays prompt
CACHE_BYTES = 256 * 1024 * 1024  # file bytes and parsed records (ITEM_BYTES each)
CONCURRENT_READS = 2  # one is read in the reader process, one waits its turn there
#: A line longer than this without its newline is junk: it is skipped, not waited for.
LINE_MAX = 64 * 1024

#: Parses whole lines into items; True when a line said the writer stopped (capped).
Parser = Callable[[list[bytes]], tuple[list[Any], bool]]


@dataclass
class Budget:
    """What one request may still read; ``partial`` once something was left for later."""

    bytes_left: int = REQUEST_READ_CAP
    files_left: int = MAX_FILES
    partial: bool = False


@dataclass(frozen=True)
class _Entry:
    offset: int
    items: list[Any] = field(default_factory=list)
    capped: bool = False


#: What one parsed record holds in memory (an object, a dict, floats): a short line of
#: a file becomes several times its bytes, so the cache counts both.
ITEM_BYTES = 200


def _weight(entry: _Entry) -> int:
    return entry.offset + ITEM_BYTES * len(entry.items)


class FileCache:
    """Parsed records per file identity, the offset they reach, least recently used out."""

    def __init__(self, capacity: int = CACHE_BYTES) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[object, ...], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._held = 0  # sum of the entries' weights (_weight)

    def get(self, key: tuple[object, ...]) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: tuple[object, ...], entry: _Entry) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            self._held -= _weight(old) if old else 0
            if _weight(entry) > self.capacity:
                return
            self._entries[key] = entry
            self._held += _weight(entry)
            while self._held > self.capacity:
                _, gone = self._entries.popitem(last=False)
                self._held -= _weight(gone)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held = 0


CACHE = FileCache()
_READING = threading.BoundedSemaphore(CONCURRENT_READS)


@contextmanager
def turn() -> Iterator[None]:
    """One of at most ``CONCURRENT_READS`` requests reading metrics at a time; one more
    is a 429 at once (taken by the request, in the server)."""
    if not _READING.acquire(blocking=False):  # never hold a request thread waiting
        raise TooManyRequests(
            f"metrics are being read for {CONCURRENT_READS} other requests; try again shortly"
        )
    try:
        yield
    finally:
        _READING.release()


@contextmanager
def folder(path: str) -> Iterator[int | None]:
    """The metrics directory's descriptor (None: missing, or reached through a link)."""
    try:
        fd = tenantfs.open_dir(path)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def names(dir_fd: int, wanted: Callable[[str], bool], budget: Budget) -> list[str]:
    """The directory's names that ``wanted`` accepts, sorted, within the budget."""
    found: list[str] = []
    with os.scandir(dir_fd) as entries:
        for seen, entry in enumerate(entries):
            if seen >= MAX_ENTRIES:
                budget.partial = True
                break
            if wanted(entry.name):
                found.append(entry.name)
    found.sort()
    return found


def read(
    dir_fd: int, key: str, name: str, parse: Parser, cap: int, budget: Budget
) -> tuple[list[Any], bool]:
    """``name``'s items and whether its writer capped it: the cached ones and those of
    the bytes after them (at most ``cap`` in the file, within ``budget``).  A file that
    cannot be read safely has none."""
    if budget.files_left <= 0:
        budget.partial = True
        return [], False
    budget.files_left -= 1
    try:
        fd, info = tenantfs.open_in(dir_fd, name)
    except OSError:
        return [], False
    try:
        ident = (key, name, info.st_dev, info.st_ino)
        entry = CACHE.get(ident)
        if entry is None or info.st_size < entry.offset:
            entry = _Entry(0)
        end = min(info.st_size, cap)
        want = min(end - entry.offset, budget.bytes_left)
        if want <= 0:
            budget.partial = budget.partial or end > entry.offset
            return entry.items, entry.capped
        if want < end - entry.offset:
            budget.partial = True
        data = tenantfs.read_from(fd, entry.offset, want)
    except OSError:
        return [], False
    finally:
        os.close(fd)
    budget.bytes_left -= len(data)
    cut = data.rfind(b"\n") + 1
    if entry.offset + len(data) >= cap or (cut == 0 and len(data) >= LINE_MAX):
        cut = len(data)  # the file's cap, or a runaway line: consumed, not waited for
    items, capped = parse(data[:cut].splitlines())
    fresh = _Entry(entry.offset + cut, entry.items + items, entry.capped or capped)
    CACHE.put(ident, fresh)
    return fresh.items, fresh.capped

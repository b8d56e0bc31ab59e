"""Report training metrics per rank, for the server to chart (torch-free, cheap).

    for step, batch in enumerate(loader):
        loss = ...
        runtime.report(step, loss=loss.item(), samples=len(batch), lr=scheduler.get_last_lr()[0])

Under ringleader's server every rank gets ``RINGLEADER_METRICS_FILE`` (from the
launch plan; ``RINGLEADER_METRICS_DIR`` names the directory, where a rank without
the file name, e.g. under mpirun, derives ``rank-R.attempt-A.jsonl``); outside it
``report`` does nothing, so the same code runs anywhere.

The file is JSON lines, one record per call, appended, flushed, never fsynced (a
crash may lose the last lines, never the loop's time)::

    {"step": 12, "time": 1764000000.123, "loss": 0.41, "samples": 64, "comm": 0.05,
     "scalars": {"lr": 0.01}}

``time`` is the wall clock when ``report`` was called; step time and samples/s
are derived by the reader from consecutive records (``samples`` counts what this
rank processed since its previous report).  ``comm`` is written for a model
wrapped by ``runtime.prepare``: the seconds per step, on average since the
previous report, that the rank waited for communication (:mod:`.steptime`);
the reader splits step time into that and compute.  Non-finite values (a diverged NaN
loss) are left out of the record and named in ``"nonfinite"``: a training loop
is never stopped by its metrics.

Bounds: at most ``MAX_SCALARS`` extra scalars, names ``NAME_PATTERN``; after
``MAX_FILE_BYTES`` a file takes no more records (one ``{"capped": true}`` line
says so) and ``dropped()`` counts the records left out.  Wrong types or names
are the caller's bug and raise ``ValueError`` naming the argument.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import time
from typing import IO

from ringleader.runtime import steptime

__all__ = ["MAX_FILE_BYTES", "MAX_SCALARS", "METRICS_DIR", "METRICS_FILE", "dropped", "report"]

METRICS_FILE = "RINGLEADER_METRICS_FILE"
METRICS_DIR = "RINGLEADER_METRICS_DIR"
MAX_SCALARS = 32
MAX_FILE_BYTES = 64 * 1024 * 1024
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,63}")
_RESERVED = frozenset({"step", "time", "loss", "samples", "comm"})


class _Sink:
    """The open file of this process (reopened after a fork or a changed path)."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.pid = 0
        self.file: IO[str] | None = None
        self.size = 0
        self.capped = False
        self.broken = False  # the file cannot be opened or written: stop trying
        self.dropped = 0

    def target(self) -> str | None:
        path = os.environ.get(METRICS_FILE)
        if path:
            return path
        folder = os.environ.get(METRICS_DIR)
        if not folder:
            return None
        rank = os.environ.get("RINGLEADER_RANK") or os.environ.get("RANK") or "0"
        attempt = os.environ.get("RINGLEADER_RESTART_COUNT", "0")
        if not (rank.isdigit() and attempt.isdigit()):
            return None
        return os.path.join(folder, f"rank-{rank}.attempt-{attempt}.jsonl")

    def open(self, path: str) -> None:
        if self.file is not None and self.pid == os.getpid():
            self.file.close()
        self.path, self.pid, self.file = path, os.getpid(), None
        self.size, self.capped, self.broken, self.dropped = 0, False, False, 0
        try:
            folder = os.path.dirname(path)
            if folder and not os.path.isdir(folder):
                # Only the last directory: its parent (the run dir) must exist here, so a
                # remote host without the server's run dir reports nothing.  Every rank
                # of a run may try at once: one makes it.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(folder, 0o755)
            self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (kept open)
            self.size = self.file.tell()
        except OSError as exc:
            self.broken = True
            print(f"ringleader: metrics are not recorded ({path}: {exc})", file=sys.stderr)

    def write(self, line: str) -> None:
        path = self.target()
        if path is None:
            return
        if path != self.path or self.pid != os.getpid():
            self.open(path)
        if self.broken or self.file is None:
            return
        if self.capped or self.size + len(line) > MAX_FILE_BYTES:
            self.dropped += 1
            if not self.capped:
                self.capped = True
                line = '{"capped": true}\n'
            else:
                return
        try:
            self.file.write(line)
            self.file.flush()
        except OSError as exc:  # a full disk: stop writing, keep training
            self.broken = True
            print(f"ringleader: metrics stopped ({path}: {exc})", file=sys.stderr)
            return
        self.size += len(line.encode("utf-8"))


_sink = _Sink()


def dropped() -> int:
    """Records this process left out because its file reached ``MAX_FILE_BYTES``."""
    return _sink.dropped


def report(
    step: int, loss: float | None = None, samples: int | None = None, **scalars: float
) -> None:
    """Append one record for ``step``; a no-op outside ringleader.  See the module doc."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step: expected an int >= 0, got {step!r}")
    if samples is not None and (
        isinstance(samples, bool) or not isinstance(samples, int) or samples < 0
    ):
        raise ValueError(f"samples: expected an int >= 0 or None, got {samples!r}")
    if len(scalars) > MAX_SCALARS:
        raise ValueError(f"scalars: at most {MAX_SCALARS} per report, got {len(scalars)}")
    record: dict[str, object] = {"step": step, "time": round(time.time(), 6)}
    nonfinite: list[str] = []
    if loss is not None:
        value = _number("loss", loss)
        if math.isfinite(value):
            record["loss"] = value
        else:
            nonfinite.append("loss")
    if samples is not None:
        record["samples"] = samples
    comm = steptime.take()
    if comm is not None:
        record["comm"] = round(comm, 6)
    extra: dict[str, float] = {}
    for name, raw in scalars.items():
        if not NAME_PATTERN.fullmatch(name) or name in _RESERVED:
            raise ValueError(f"{name}: a scalar's name must match {NAME_PATTERN.pattern}")
        value = _number(name, raw)
        if math.isfinite(value):
            extra[name] = value
        else:
            nonfinite.append(name)
    if extra:
        record["scalars"] = extra
    if nonfinite:
        record["nonfinite"] = nonfinite
    _sink.write(json.dumps(record, separators=(",", ":")) + "\n")


def _number(name: str, value: object) -> float:
    """A real number as a float (torch/numpy scalars pass through ``float``)."""
    if isinstance(value, bool | str | bytes):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number, got {type(value).__name__}") from None

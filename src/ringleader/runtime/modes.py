"""The communication-efficient training modes, as words: parsed and checked once.

``prepare(model, grad_compression=..., sync_every=...)``, ``ringleader launch
--grad-compression/--sync-every``, the submit commands' flags and the workload
spec's ``gradCompression``/``syncEvery`` all read their values here, so a value
means the same everywhere and a bad one is refused with the same words before
anything runs.  The launcher and the server pass a chosen mode to every rank as
``RINGLEADER_GRAD_COMPRESSION`` / ``RINGLEADER_SYNC_EVERY``; ``prepare()``
reads them when its own arguments are not given.

- ``none`` (default): exact DDP, every gradient all-reduced in fp32;
- ``fp16`` / ``bf16``: gradients cast to half precision for the all-reduce
  (torch's ``fp16_compress_hook`` / ``bf16_compress_hook``; bf16 needs NCCL);
- ``powersgd[:R]``: torch's PowerSGD hook, rank-R low-rank gradients with error
  feedback (R defaults to ``DEFAULT_POWERSGD_RANK``);
- ``sync_every=H`` (H > 1): local SGD: no gradient all-reduce, the parameters
  are averaged every H optimizer steps (torch's ``post_localSGD_hook`` and
  ``PeriodicModelAverager``).

The first ``WARMUP_STEPS`` steps of powersgd and of local SGD are exact DDP,
as torch's documentation recommends (PowerSGD cannot start before step 2).

Standard library only: the launcher imports this module (it must start fast).
"""

from __future__ import annotations

from dataclasses import dataclass

GRAD_COMPRESSION_ENV = "RINGLEADER_GRAD_COMPRESSION"
SYNC_EVERY_ENV = "RINGLEADER_SYNC_EVERY"
COMPRESSIONS = ("none", "bf16", "fp16", "powersgd")
DEFAULT_POWERSGD_RANK = 2
MAX_POWERSGD_RANK = 256
MAX_SYNC_EVERY = 100_000
WARMUP_STEPS = 10
CHOICES = "none, bf16, fp16 or powersgd[:RANK]"


@dataclass(frozen=True)
class CommMode:
    """A checked mode: ``compression`` (one of ``COMPRESSIONS``), PowerSGD's
    ``rank`` (0 unless powersgd) and ``sync_every`` (1: every step)."""

    compression: str = "none"
    rank: int = 0
    sync_every: int = 1

    @property
    def exact(self) -> bool:
        """Plain DDP: what ringleader did before the modes existed."""
        return self.compression == "none" and self.sync_every == 1

    def compression_word(self) -> str:
        """The compression as a user writes it (``powersgd:4``)."""
        return f"powersgd:{self.rank}" if self.compression == "powersgd" else self.compression

    def describe(self) -> str:
        """One phrase for logs and ``describe``: 'exact DDP', 'powersgd:4', 'sync every 8'."""
        if self.exact:
            return "exact DDP"
        if self.sync_every > 1:
            return f"local SGD, parameters averaged every {self.sync_every} steps"
        return f"{self.compression_word()} gradient compression"


def parse_compression(value: object) -> tuple[str, int]:
    """``(compression, powersgd rank)`` of a word; ValueError saying what is accepted."""
    if not isinstance(value, str):
        raise ValueError(f"expected {CHOICES}, got {value!r}")
    word, sep, rank_text = value.strip().lower().partition(":")
    if word not in COMPRESSIONS or (sep and word != "powersgd"):
        raise ValueError(f"expected {CHOICES}, got {value!r}")
    if word != "powersgd":
        return word, 0
    if not sep:
        return word, DEFAULT_POWERSGD_RANK
    if not rank_text.isdigit() or not 1 <= int(rank_text) <= MAX_POWERSGD_RANK:
        raise ValueError(
            f"powersgd's rank must be a whole number from 1 to {MAX_POWERSGD_RANK}, "
            f"got {rank_text!r}"
        )
    return word, int(rank_text)


def parse_sync_every(value: object) -> int:
    """H of ``sync_every``: a whole number from 1 (every step) to ``MAX_SYNC_EVERY``."""
    if isinstance(value, bool):
        value = repr(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or not 1 <= value <= MAX_SYNC_EVERY:
        raise ValueError(
            f"expected a whole number of steps from 1 to {MAX_SYNC_EVERY}, got {value!r}"
        )
    return value


def make_mode(compression: object = None, sync_every: object = None) -> CommMode:
    """A checked ``CommMode`` (None: the default).  ValueError(where, problem) names
    which of the two is wrong: ``exc.args == (where, problem)``."""
    try:
        word, rank = parse_compression("none" if compression is None else compression)
    except ValueError as exc:
        raise ValueError("grad_compression", str(exc)) from None
    try:
        every = parse_sync_every(1 if sync_every is None else sync_every)
    except ValueError as exc:
        raise ValueError("sync_every", str(exc)) from None
    if every > 1 and word != "none":
        raise ValueError(
            "sync_every",
            f"local SGD (sync every {every}) sends no gradients, so it cannot be combined "
            f"with {word} gradient compression: choose one",
        )
    return CommMode(word, rank, every)


def mode_env(mode: CommMode) -> dict[str, str]:
    """The variables that carry ``mode`` to every rank (none for exact DDP, so a
    job without the flags gets exactly the environment it got before)."""
    env: dict[str, str] = {}
    if mode.compression != "none":
        env[GRAD_COMPRESSION_ENV] = mode.compression_word()
    if mode.sync_every > 1:
        env[SYNC_EVERY_ENV] = str(mode.sync_every)
    return env


def launch_env(compression: str | None, sync_every: int | None) -> dict[str, str]:
    """``ringleader launch``'s two flags as rank variables; InvalidSpec naming the flag."""
    from ringleader.errors import InvalidSpec

    try:
        return mode_env(make_mode(compression, sync_every))
    except ValueError as exc:
        where, problem = exc.args
        raise InvalidSpec(problem, f"--{where.replace('_', '-')}") from None

"""Figures as users write them on ``ringleader plan``'s command line.

Why its own module: each parser raises ``ValueError`` with what it accepts, and the
CLI turns that into an error naming the flag (``InvalidSpec``).
"""

from __future__ import annotations

import re

_COUNT = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_NUMBER = r"(\d+(?:\.\d+)?)"


def parse_count(text: str) -> int:
    """``25M`` -> 25_000_000 (decimal: K, M, B or G), ``1.5B``, ``350000``."""
    match = re.fullmatch(_NUMBER + r"\s*([kmbg]?)", text.strip().lower())
    if match is None:
        raise ValueError(f"{text!r} is not a parameter count: e.g. 25M, 1.5B, 350000")
    count = round(float(match.group(1)) * _COUNT[match.group(2)])
    if count < 1:
        raise ValueError(f"{text!r}: at least 1 parameter")
    return count


def parse_duration(text: str) -> float:
    """``120ms`` -> 0.12 seconds; ``1.5s``, ``50us``. A bare number is refused (which
    unit would it be?)."""
    match = re.fullmatch(_NUMBER + r"\s*(s|ms|us|µs)", text.strip().lower())
    if match is None:
        raise ValueError(f"{text!r} is not a duration: a number and s, ms or us (120ms)")
    return float(match.group(1)) * _TIME[match.group(2)]


def parse_shape(text: str) -> tuple[int, ...]:
    """``3,32,32`` -> (3, 32, 32): one sample's input shape, without the batch."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"{text!r} is not a shape: positive sizes, comma-separated (3,32,32)")
    return tuple(int(p) for p in parts)

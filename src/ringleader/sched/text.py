"""Amounts as people read them in pending reasons: "2 GPUs", "0.5", "12 GiB".

Invariants: numbers are rounded to at most three decimals and shown without
trailing zeros, so float noise (0.30000000000000004) never reaches a user.
"""

from __future__ import annotations

from ringleader.sched.model import Resource

NOUNS: dict[Resource, str] = {"gpu": "GPU", "cpu": "CPU", "memory": "memory"}
UNITS: dict[Resource, str] = {"gpu": "GPUs", "cpu": "CPU cores", "memory": "memory"}


def number(value: float) -> str:
    return f"{round(value, 3):g}"


def size(value: float) -> str:
    """Bytes in binary units, the way Kubernetes quantities print them."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(value) >= factor:
            return f"{number(value / factor)} {unit}"
    return f"{number(value)} B"


def decimal_size(value: float) -> str:
    """Bytes as 512M / 64G / 1.5T: decimal, as ``--memory 64G`` reads them and
    ``ringleader nodes list`` prints them."""
    for unit, factor in (("T", 10**12), ("G", 10**9), ("M", 10**6)):
        if value >= factor:
            return f"{value / factor:.3g}{unit}"
    return f"{value:.0f}" if value else "0"


def amount(resource: Resource, value: float) -> str:
    """The bare figure of an amount of a resource (bytes get a unit)."""
    return size(value) if resource == "memory" else number(value)


def counted(count: float, noun: str) -> str:
    """ "1 GPU", "2 GPUs", "0.5 GPU"."""
    return f"{number(count)} {noun}{'' if count <= 1 else 's'}"

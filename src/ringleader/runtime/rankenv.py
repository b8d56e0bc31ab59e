"""The answer of environment detection and the small readers every source shares (torch-free).

Split from :mod:`ringleader.runtime.env` so that the per-scheduler readers in
:mod:`ringleader.runtime.env_readers` and the detection logic can share them
without importing each other.  See :mod:`ringleader.runtime.env` for the
nomenclature and invariants of :class:`RankEnv`.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "DEFAULT_PORT",
    "LOOPBACK",
    "PORT_BASE",
    "PORT_SPAN",
    "EnvError",
    "NoLauncherEnvironment",
    "RankEnv",
    "first_set",
    "port_from_job_id",
    "read_int",
    "read_port",
]

#: Ports derived from a scheduler job id land in ``[PORT_BASE, PORT_BASE + PORT_SPAN)``.
PORT_BASE = 20000
PORT_SPAN = 10000
#: torch's conventional rendezvous port, used when nothing better is known.
DEFAULT_PORT = 29500
LOOPBACK = "127.0.0.1"


class EnvError(ValueError):
    """The launcher environment is present but malformed or self-contradictory."""


class NoLauncherEnvironment(EnvError):
    """No launcher names were found although a world larger than one is expected."""


@dataclass(frozen=True)
class RankEnv:
    """This process's place in the job, as read from one launcher's names."""

    source: str
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    node_rank: int = 0
    nnodes: int = 1
    master_addr: str | None = None
    master_port: int | None = None


def read_int(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    """Read an integer variable, naming the variable in the error (not just the value)."""
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        if default is None:
            raise EnvError(f"{name} is not set")
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not an integer") from None


def first_set(environ: Mapping[str, str], *names: str) -> str | None:
    """The value of the first of ``names`` that is set and non-empty."""
    for name in names:
        value = environ.get(name)
        if value:
            return value
    return None


def port_from_job_id(job_id: str) -> int:
    """A port every rank of one job derives alike, spread so concurrent jobs rarely collide."""
    job_id = job_id.strip()
    number = int(job_id) if job_id.isdigit() else zlib.crc32(job_id.encode())
    return PORT_BASE + number % PORT_SPAN


def read_port(environ: Mapping[str, str], name: str = "MASTER_PORT") -> int | None:
    return read_int(environ, name) if environ.get(name) else None

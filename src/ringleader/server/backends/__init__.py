"""Backends: the registry, and which backend runs the work of each node pool.

Adding a backend is one module (a ``Backend`` subclass, see ``base``) and one
line in ``REGISTRY``; a backend outside this package is named by its dotted
path (``--backend mypkg.engines.MyBackend``) and needs no line at all.

Nomenclature:
- *choice*: one ``--backend NAME[:ARG][@POOL]`` (``BackendChoice``); without
  ``@POOL`` it is the default for every pool not named otherwise;
- *backend set*: the server's backends by name and its pool -> backend map
  (``BackendSet``); a workload row records the name of the backend that
  started it, so a poll, stop or log read reaches the same one.

Invariant: with no choice, every pool runs on ``local``, and a gang bound to
SSH nodes on ``ssh`` (the same supervisor with agents over SSH).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ringleader.errors import InvalidSpec
from ringleader.sched import DEFAULT_POOL
from ringleader.server import node_kinds
from ringleader.server.backends.base import Backend, BackendContext, PodPlacement

__all__ = ["REGISTRY", "Backend", "BackendChoice", "BackendContext", "BackendSet"]

REGISTRY: dict[str, str] = {
    "local": "ringleader.server.backends.local.LocalBackend",
    "ssh": "ringleader.server.backends.ssh.SSHBackend",
    "slurm": "ringleader.server.backends.slurm.SlurmBackend",
}
DEFAULT = "local"
_CHOICE = re.compile(
    r"^(?P<name>[A-Za-z_][\w.]*)(?::(?P<arg>[^@]*))?(?:@(?P<pool>[a-z0-9]([-a-z0-9]*[a-z0-9])?))?$"
)


@dataclass(frozen=True)
class BackendChoice:
    name: str
    arg: str = ""
    pool: str | None = None  # None: the default for pools not named

    @classmethod
    def parse(cls, text: str) -> BackendChoice:
        """``NAME[:ARG][@POOL]``; an error names ``--backend`` and what is known."""
        match = _CHOICE.match(text.strip())
        if match is None or (match["name"] not in REGISTRY and "." not in match["name"]):
            known = ", ".join(sorted(REGISTRY))
            raise InvalidSpec(
                f"{text!r}: NAME[:ARG][@POOL] with NAME one of {known} "
                "(or a backend class's dotted path)",
                "--backend",
            )
        return cls(match["name"], match["arg"] or "", match["pool"])


def backend_class(name: str) -> type[Backend]:
    path = REGISTRY.get(name, name)
    module, _, attr = path.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InvalidSpec(f"no backend {name!r} ({exc})", "--backend") from exc
    if not (isinstance(found, type) and issubclass(found, Backend)):
        raise InvalidSpec(f"{path} is not a ringleader Backend", "--backend")
    return found


class BackendSet:
    """The server's backends: created once each, by name, on first use."""

    def __init__(
        self,
        choices: Iterable[BackendChoice] = (),
        context: BackendContext | None = None,
        made: Mapping[str, Backend] | None = None,
    ) -> None:
        self.context = context or BackendContext()
        choices = list(choices)
        defaults = [c for c in choices if c.pool is None]
        self.default_name = defaults[-1].name if defaults else DEFAULT
        self.pools = {c.pool: c.name for c in choices if c.pool is not None}
        self._args = {c.name: c.arg for c in choices}
        for choice in choices:  # one instance per name: its ARG cannot differ by pool
            if choice.arg != self._args[choice.name]:
                raise InvalidSpec(
                    f"{choice.name} is given twice with different arguments "
                    f"({choice.arg!r} and {self._args[choice.name]!r}): one {choice.name} "
                    "backend per server",
                    "--backend",
                )
        self._made: dict[str, Backend] = dict(made or {})
        for name in {self.default_name, *self.pools.values()}:
            self.named(name)  # a bad choice fails at start-up, not at the first workload

    @classmethod
    def only(cls, backend: Backend) -> BackendSet:
        """Every pool and every row on ``backend`` (tests and benchmarks inject one)."""
        made = cls(made={DEFAULT: backend, backend.name: backend})
        made._only = backend
        return made

    _only: Backend | None = None

    @property
    def default(self) -> Backend:
        return self.named(self.default_name)

    def named(self, name: str | None) -> Backend:
        """The backend called ``name`` (a row's; None: rows from before backends had names)."""
        if self._only is not None:
            return self._only
        name = name or DEFAULT
        if name not in self._made:
            cls = backend_class(name)
            context = dataclasses.replace(self.context, pools=self.pools_of(name))
            made = cls.configured(context, self._args.get(name, ""))
            # Rows record the backend's own short name: a dotted path may be long.
            self._made[name] = self._made.setdefault(made.name, made)
        return self._made[name]

    def pools_of(self, name: str) -> tuple[str, ...]:
        """The pools ``name`` serves: those named for it, and ``default`` if it is the
        default (a backend with nodes of its own puts them there)."""
        named = sorted(pool for pool, backend in self.pools.items() if backend == name)
        return (*named, *((DEFAULT_POOL,) if name == self.default_name else ()))

    def all(self) -> list[Backend]:
        return list(self._made.values())

    def for_pool(self, pool: str | None) -> Backend:
        """Whose rules a workload for ``pool`` is checked against at submit."""
        return self.named(self.pools.get(pool or "", self.default_name))

    def for_placement(
        self, placements: Mapping[str, PodPlacement], pool_of: Mapping[str, str]
    ) -> Backend:
        """Who runs a gang bound as ``placements``: its nodes' pool's backend if the
        configuration names one, else by node kind (SSH nodes: ``ssh``), else the default."""
        for placement in placements.values():
            pool = pool_of.get(placement.node)
            if pool in self.pools:
                return self.named(self.pools[pool])
        for placement in placements.values():
            by_kind = node_kinds.backend_for(placement.node_kind)
            if by_kind is not None:  # a node of this kind runs on its backend
                return self.named(by_kind)
        return self.default

"""Quota bookkeeping and fair share: who uses what, and who may use more.

Nomenclature:
- *amounts*: a (gpu, cpu, memory) triple in devices, cores and bytes; the
  GPU figure of a fraction is its share of the device.
- *usage*: what a project's (or department's) running pods hold in a pool.
- *in quota*: usage + request <= deserved for every resource the request
  asks for (an unmanaged resource, deserved ``None``, is always in quota).
- *fair share*: deserved (capped by demand) plus a share of the pool's
  unused capacity in proportion to over-quota weight, filled like water:
  a project that needs less than its share gives the rest back to the
  others, and no share passes a project's limit.
- *demand*: usage plus what pending workloads ask for in the pool; a
  non-preemptible request counts only up to deserved, since more can never
  run.

Invariants: fair shares are worked out once per cycle from the snapshot, so
the order in which workloads are considered cannot shift them; usage changes
only through the journal, so trials are undone exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ringleader.sched.journal import Journal
from ringleader.sched.model import (
    RESOURCES,
    Department,
    PendingCause,
    Project,
    Resource,
)
from ringleader.sched.nodes import EPS
from ringleader.sched.text import NOUNS, UNITS, amount

Amounts = tuple[float, float, float]
ZERO: Amounts = (0.0, 0.0, 0.0)
INF = math.inf


def add(a: Sequence[float], b: Sequence[float]) -> Amounts:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


class QuotaMiss:
    """Why a request does not fit a quota or limit.

    The words are put together only when read: most misses are superseded
    by a later pass's (or only counted), so a cycle that checks quotas tens
    of thousands of times words only the few reasons a user will see.
    ``reason`` is a string, or a function and the figures it needs, taken
    when the miss was found (usage changes afterwards).
    """

    __slots__ = ("_args", "_reason", "cause")

    def __init__(self, cause: PendingCause, reason: str | Callable[..., str], *args: Any) -> None:
        self.cause = cause
        self._reason = reason
        self._args = args

    @property
    def reason(self) -> str:
        if not isinstance(self._reason, str):
            self._reason = self._reason(*self._args)
            self._args = ()
        return self._reason

    def __repr__(self) -> str:
        return f"QuotaMiss({self.cause!r}, {self.reason!r})"


class _Terms(NamedTuple):
    """A project's quota terms in one pool, as the checks read them."""

    deserved: Amounts  # unmanaged: infinite
    limits: Amounts | None  # None: no limit on any resource
    department: str | None
    caps: tuple[float | None, float | None, float | None] | None  # None: no cap at all


class QuotaBook:
    """Usage per (project, pool) and (department, pool), and the checks on it."""

    def __init__(
        self, projects: Iterable[Project], departments: Iterable[Department], journal: Journal
    ) -> None:
        self.projects = {p.name: p for p in projects}
        self.departments = {d.name: d for d in departments}
        self.journal = journal
        self.usage: dict[tuple[str, str], list[float]] = {}
        self.department_usage: dict[tuple[str, str], list[float]] = {}
        self.fair: dict[tuple[str, str], Amounts] = {}
        # Per (project, pool), read off the frozen projects once: the checks
        # below run for every trial of every workload.
        self._terms: dict[tuple[str, str], _Terms] = {}

    def _terms_of(self, project: str, pool: str) -> _Terms:
        terms = self._terms.get((project, pool))
        if terms is None:
            owner = self.projects[project]
            quota = owner.quota(pool)
            gpu, cpu, memory = quota.gpu, quota.cpu, quota.memory
            deserved = (_or_inf(gpu.deserved), _or_inf(cpu.deserved), _or_inf(memory.deserved))
            limits = (_or_inf(gpu.limit), _or_inf(cpu.limit), _or_inf(memory.limit))
            caps = None
            if owner.department is not None:
                of = self.departments[owner.department].limit(pool)
                caps = (of.gpu, of.cpu, of.memory)
            terms = _Terms(
                deserved,
                None if all(math.isinf(x) for x in limits) else limits,
                owner.department,
                None if caps is None or caps == (None, None, None) else caps,
            )
            self._terms[project, pool] = terms
        return terms

    def used(self, project: str, pool: str) -> Amounts:
        row = self.usage.get((project, pool))
        return (row[0], row[1], row[2]) if row else ZERO

    def change(self, project: str, pool: str, amounts: Sequence[float], sign: int) -> None:
        rows = [self.usage.setdefault((project, pool), [0.0, 0.0, 0.0])]
        owner = self.projects.get(project)  # a running workload may outlive its project
        department = owner.department if owner else None
        if department is not None:
            rows.append(self.department_usage.setdefault((department, pool), [0.0, 0.0, 0.0]))
        for row in rows:
            self.journal.save(row)
            for i, value in enumerate(amounts):
                if value:
                    row[i] = row[i] + sign * value

    def deserved(self, project: str, pool: str, resource: Resource) -> float:
        """Deserved quota of one resource; unmanaged is infinite."""
        return self._terms_of(project, pool).deserved[RESOURCES.index(resource)]

    def limit(self, project: str, pool: str, resource: Resource) -> float:
        """The project's limit of one resource; none is infinite."""
        limits = self._terms_of(project, pool).limits
        return INF if limits is None else limits[RESOURCES.index(resource)]

    def limit_miss(self, project: str, pool: str, request: Amounts) -> QuotaMiss | None:
        """The first project or department limit the request would pass."""
        terms = self._terms_of(project, pool)
        limits = terms.limits
        if limits is not None:  # (no limit at all: nothing to pass)
            used = self.usage.get((project, pool)) or ZERO
            for i in range(3):
                limit, wanted = limits[i], request[i]
                if wanted and used[i] + wanted > limit + EPS:
                    owner, resource = f"project {project}", RESOURCES[i]
                    return QuotaMiss("limit", _at_limit, owner, resource, used[i], limit, wanted)
        caps = terms.caps
        if caps is None:  # no department, or one without caps here
            return None
        department = terms.department
        row = self.department_usage.get((department, pool)) or ZERO
        for i in range(3):
            cap, wanted = caps[i], request[i]
            if cap is not None and wanted and row[i] + wanted > cap + EPS:
                owner, resource = f"department {department}", RESOURCES[i]
                return QuotaMiss(
                    "department-limit", _at_limit, owner, resource, row[i], cap, wanted
                )
        return None

    def in_quota(self, project: str, pool: str, request: Amounts) -> bool:
        return self.deserved_miss(project, pool, request) is None

    def deserved_miss(self, project: str, pool: str, request: Amounts) -> QuotaMiss | None:
        """Why the request is not in quota (what non-preemptible work must be)."""
        used = self.usage.get((project, pool)) or ZERO
        row = self._terms_of(project, pool).deserved
        for i in range(3):
            deserved, wanted = row[i], request[i]
            if wanted and used[i] + wanted > deserved + EPS:
                total, resource = used[i] + wanted, RESOURCES[i]
                return QuotaMiss("quota", _over_deserved, project, pool, resource, total, deserved)
        return None

    def within_fair_share(self, project: str, pool: str, request: Amounts) -> bool:
        used = self.usage.get((project, pool)) or ZERO
        fair = self.fair.get((project, pool), ZERO)
        return all(not request[i] or used[i] + request[i] <= fair[i] + EPS for i in range(3))

    def above_fair_share(self, project: str, pool: str, request: Amounts) -> bool:
        """Holds more than its fair share of a resource ``request`` asks for."""
        used = self.usage.get((project, pool)) or ZERO
        fair = self.fair.get((project, pool), ZERO)
        return any(request[i] and used[i] > fair[i] + EPS for i in range(3))

    def fair_share(self, project: str, pool: str) -> Amounts:
        return self.fair.get((project, pool), ZERO)


def _over_deserved(
    project: str, pool: str, resource: Resource, wanted: float, deserved: float
) -> str:
    return (
        f"non-preemptible work must fit in deserved quota: project {project} "
        f"would use {amount(resource, wanted)} of its "
        f"{amount(resource, deserved)} deserved {UNITS[resource]} in pool {pool}"
    )


def _or_inf(value: float | None) -> float:
    return INF if value is None else value


def _at_limit(owner: str, resource: Resource, used: float, limit: float, wanted: float) -> str:
    noun, figures = NOUNS[resource], f"{amount(resource, used)} of {amount(resource, limit)}"
    if used + EPS >= limit:
        return f"{owner} is at its {noun} limit ({figures})"
    needs = amount(resource, wanted)
    return f"{owner} would pass its {noun} limit: this needs {needs}, {figures} in use"


def fair_shares(
    book: QuotaBook,
    capacity: Mapping[str, Amounts],
    demand: Mapping[tuple[str, str], Amounts],
) -> dict[tuple[str, str], Amounts]:
    """Fair share per (project, pool) for every project with demand there."""
    result: dict[tuple[str, str], Amounts] = {}
    for pool in sorted(capacity):
        names = sorted(p for (p, q) in demand if q == pool)
        columns = []
        for i, resource in enumerate(RESOURCES):
            claims = [
                Claim(
                    deserved=book.deserved(name, pool, resource),
                    limit=book.limit(name, pool, resource),
                    weight=book.projects[name].quota(pool).of(resource).over_quota_weight,
                    demand=demand[name, pool][i],
                )
                for name in names
            ]
            columns.append(water_fill(capacity[pool][i], claims))
        for k, name in enumerate(names):
            result[name, pool] = (columns[0][k], columns[1][k], columns[2][k])
    return result


@dataclass(frozen=True)
class Claim:
    deserved: float
    limit: float
    weight: float
    demand: float


def water_fill(capacity: float, claims: Sequence[Claim]) -> list[float]:
    """Deserved first (up to demand and limit), then the rest by weight.

    An unmanaged claim (deserved infinite) is its demand, and uses capacity
    like any other; what is left is shared among the managed claims.
    """
    wants = [min(c.demand, c.limit) for c in claims]
    shares = [min(c.deserved, want) for c, want in zip(claims, wants, strict=True)]
    left = capacity - sum(shares)
    while left > EPS:
        hungry = [k for k, c in enumerate(claims) if c.weight > 0 and shares[k] < wants[k] - EPS]
        weights = sum(claims[k].weight for k in hungry)
        if not hungry or weights <= 0:
            break
        given = 0.0
        for k in hungry:
            more = min(left * claims[k].weight / weights, wants[k] - shares[k])
            shares[k] += more
            given += more
        left -= given
        if given <= EPS:
            break
    return [
        INF if math.isinf(c.deserved) else share for c, share in zip(claims, shares, strict=True)
    ]

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

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


@dataclass(frozen=True)
class QuotaMiss:
    cause: PendingCause
    reason: str


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
            for i, value in enumerate(amounts):
                if value:
                    self.journal.set(row, i, row[i] + sign * value)

    def deserved(self, project: str, pool: str, resource: Resource) -> float:
        value = self.projects[project].quota(pool).of(resource).deserved
        return INF if value is None else value

    def limit(self, project: str, pool: str, resource: Resource) -> float:
        value = self.projects[project].quota(pool).of(resource).limit
        return INF if value is None else value

    def limit_miss(self, project: str, pool: str, request: Amounts) -> QuotaMiss | None:
        """The first project or department limit the request would pass."""
        used = self.used(project, pool)
        for i, resource in enumerate(RESOURCES):
            limit = self.limit(project, pool, resource)
            if request[i] and used[i] + request[i] > limit + EPS:
                return QuotaMiss(
                    "limit", _at_limit(f"project {project}", resource, used[i], limit, request[i])
                )
        department = self.projects[project].department
        if department is None:
            return None
        caps = self.departments[department].limit(pool)
        row = self.department_usage.get((department, pool), [0.0, 0.0, 0.0])
        for i, resource in enumerate(RESOURCES):
            cap = caps.of(resource)
            if cap is not None and request[i] and row[i] + request[i] > cap + EPS:
                return QuotaMiss(
                    "department-limit",
                    _at_limit(f"department {department}", resource, row[i], cap, request[i]),
                )
        return None

    def in_quota(self, project: str, pool: str, request: Amounts) -> bool:
        return self.deserved_miss(project, pool, request) is None

    def deserved_miss(self, project: str, pool: str, request: Amounts) -> QuotaMiss | None:
        """Why the request is not in quota (what non-preemptible work must be)."""
        used = self.used(project, pool)
        for i, resource in enumerate(RESOURCES):
            deserved = self.deserved(project, pool, resource)
            if request[i] and used[i] + request[i] > deserved + EPS:
                return QuotaMiss(
                    "quota",
                    f"non-preemptible work must fit in deserved quota: project {project} "
                    f"would use {amount(resource, used[i] + request[i])} of its "
                    f"{amount(resource, deserved)} deserved {UNITS[resource]} in pool {pool}",
                )
        return None

    def within_fair_share(self, project: str, pool: str, request: Amounts) -> bool:
        used, fair = self.used(project, pool), self.fair_share(project, pool)
        return all(not request[i] or used[i] + request[i] <= fair[i] + EPS for i in range(3))

    def above_fair_share(self, project: str, pool: str, request: Amounts) -> bool:
        """Holds more than its fair share of a resource ``request`` asks for."""
        used, fair = self.used(project, pool), self.fair_share(project, pool)
        return any(request[i] and used[i] > fair[i] + EPS for i in range(3))

    def fair_share(self, project: str, pool: str) -> Amounts:
        return self.fair.get((project, pool), ZERO)


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

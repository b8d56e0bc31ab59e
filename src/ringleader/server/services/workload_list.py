"""The workloads list: Run:ai's filterBy / sortBy / offset / limit, in SQL.

Invariants:
- a user sees only workloads of projects they belong to (admins see all),
  through ``workloads.visible_projects``, as every other read;
- the list sorts by any column the workloads table shows, in SQL on both
  databases, each through an index (``_SORTS``): what a spec asks for in all
  is stored on the row at submit (``workloads.requested``) and the Running
  pods are counted on the row by ``phases``, so no sort counts pods per row;
- bad user input is an InvalidSpec (422) naming ``filterBy`` / ``sortBy`` /
  ``sortOrder`` / ``offset``, never a database error: a value with NUL finds
  nothing, createdAt filters take ISO times, ``=@`` is a literal substring.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session, selectinload

from ringleader.errors import InvalidSpec
from ringleader.server.auth import pod_project
from ringleader.server.models import Project, User, Workload
from ringleader.server.services.workloads import findable, visible_projects

# The total of a list's filters, given them and a function that counts it now.
TotalOf = Callable[[tuple[str, ...], Callable[[], int]], int]

_FILTER = re.compile(r"^(\w+)(==|!=|<=|>=|=@)(.*)$")
_FIELDS = {
    "name": Workload.name,
    "phase": Workload.phase,
    "actualPhase": Workload.phase,
    "projectId": Workload.project_id,
    "projectName": Project.name,
    "framework": Workload.framework,
    "createdBy": User.name,  # the name, as WorkloadOut shows it
    "createdAt": Workload.created_at,
    "completedAt": Workload.completed_at,
}
_TIME_FIELDS = frozenset({"createdAt", "completedAt"})
# What the list sorts by: every filter field, and the figures of the table's
# Pods / GPU / CPU columns (Run:ai's ``runningPods``; the rest as WorkloadOut names them).
_SORTS: dict[str, Any] = {
    **_FIELDS,
    "runningPods": Workload.running_pods,
    "requestedPods": Workload.requested_pods,
    "requestedGpus": Workload.requested_gpus,
    "requestedCpuCores": Workload.requested_cpu_cores,
}
# The largest OFFSET both SQLite and PostgreSQL take (a signed 64-bit integer).
MAX_OFFSET = 2**63 - 1


def _filter_time(value: str) -> datetime:
    """A filter's ISO time as aware UTC (naive means UTC); 422 when it is not one."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidSpec(
            f"{value!r} is not an ISO time (e.g. 2024-05-01T12:00:00Z)", "filterBy"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:  # year 1 east of UTC, or 9999 west of it: clamp to the range
        return (datetime.min if moment.year == 1 else datetime.max).replace(tzinfo=timezone.utc)


def _condition(field: str, op: str, value: str) -> ColumnElement[bool]:
    """One ``FIELD<op>VALUE`` term; 422 when VALUE cannot be compared with FIELD."""
    column = _FIELDS[field]
    if not findable(value):
        raise InvalidSpec("a filter value cannot contain NUL", "filterBy")
    if op == "=@":
        if field in _TIME_FIELDS:
            raise InvalidSpec(f"{field} takes ==, !=, <= or >= with an ISO time", "filterBy")
        return column.contains(value, autoescape=True)  # % and _ are literal
    operand: object = _filter_time(value) if field in _TIME_FIELDS else value
    return {
        "==": column == operand,
        "!=": column != operand,
        "<=": column <= operand,
        ">=": column >= operand,
    }[op]


def page_select(
    session: Session,
    user: User,
    *,
    filters: Sequence[str] = (),
    sort_by: str = "createdAt",
    sort_order: str = "desc",
    offset: int = 0,
    limit: int = 50,
    total_of: TotalOf | None = None,
) -> tuple[Select[tuple[Workload]], int]:
    """The page's query (of Workload rows, sorted, offset and limited) and the total of
    its filter; ``list_workloads`` runs it, the UI's live update reads columns of it.
    ``total_of`` (the UI's pages) may answer the total from what it counted before for
    the same filters (``ui_live.LiveCache.total``); the API counts every time."""
    terms: list[ColumnElement[bool]] = [Workload.deleted_at.is_(None)]
    # An admin sees every project: no IN, so the sort can use an index (not a pod's).
    if not user.is_admin or pod_project(session) is not None:
        terms.append(Workload.project_id.in_(visible_projects(session, user)))
    if sort_by not in _SORTS:
        raise InvalidSpec(f"unknown field; choose one of {sorted(_SORTS)}", "sortBy")
    used = {sort_by}
    for raw in filters:
        for item in raw.split(","):
            match = _FILTER.match(item.strip())
            if not match or match.group(1) not in _FIELDS:
                raise InvalidSpec(
                    f"expected FIELD(==|!=|<=|>=|=@)VALUE with FIELD in {sorted(_FIELDS)}",
                    "filterBy",
                )
            terms.append(_condition(match.group(1), match.group(2), match.group(3)))
            used.add(match.group(1))
    query = select(Workload)
    if "projectName" in used:  # join only for the fields that need it
        query = query.join(Project, Project.id == Workload.project_id)
    if "createdBy" in used:
        query = query.outerjoin(User, User.id == Workload.created_by)
    query = query.where(*terms)
    if sort_order not in ("asc", "desc"):
        raise InvalidSpec("must be asc or desc", "sortOrder")
    if not 0 <= offset <= MAX_OFFSET:
        raise InvalidSpec(f"must be between 0 and {MAX_OFFSET}", "offset")
    column = _SORTS[sort_by]
    # Counted in an index alone where one holds the filter's columns (migration 0010).
    counting = query.with_only_columns(func.count(), maintain_column_froms=True)

    def count() -> int:
        return session.scalar(counting) or 0

    total = count() if total_of is None else total_of(tuple(filters), count)
    # Ties go in the sort's direction too, so a (column, id) index serves either order
    # by scanning it forwards or backwards (ties always ascending made PostgreSQL
    # top-N-sort a whole group of equal values: 5 ms a page at 100,000 workloads).
    if sort_order == "asc":
        order = (column.asc(), Workload.id.asc())
    else:
        order = (column.desc(), Workload.id.desc())
    return query.order_by(*order).offset(offset).limit(limit), total


def list_workloads(
    session: Session,
    user: User,
    *,
    filters: Sequence[str] = (),
    sort_by: str = "createdAt",
    sort_order: str = "desc",
    offset: int = 0,
    limit: int = 50,
    total_of: TotalOf | None = None,
) -> tuple[list[Workload], int]:
    """A page of the workloads ``user`` may see (their pods loaded) and the total."""
    page, total = page_select(
        session,
        user,
        filters=filters,
        sort_by=sort_by,
        sort_order=sort_order,
        offset=offset,
        limit=limit,
        total_of=total_of,
    )
    # One query for the page's pods instead of one per workload (views.workload_out counts them).
    rows = list(session.scalars(page.options(selectinload(Workload.pods))))
    return rows, total

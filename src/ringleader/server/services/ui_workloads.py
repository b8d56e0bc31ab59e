"""What the workloads page reads: its query (filters, sort, page) parsed from
GET parameters, one page of rows through the API's own list logic
(``workloads.list_workloads`` + ``views.workload_out``), and a version of that
page for live updates.

Why a module of its own: the page's query is the URL (shareable, works without
JavaScript), so parsing it must give a clear message for every bad value, and
the live update must answer "nothing changed" without building the page.

Invariants:
- visibility and filtering are the API's (``list_workloads``): a user sees
  only their projects' workloads; a project they cannot see is "unknown";
- a page costs a fixed number of queries whatever its length (count, page,
  pods, names, phase changes), never one per row;
- ``version`` changes whenever anything a row shows changes (a workload's or
  one of its pods' ``updated_at``, the total, the page's membership);
- the live update (``ui_live``) reads what a page holds from columns, shared
  between viewers who see the same projects, and builds only the rows a browser lacks.
"""

from __future__ import annotations

import hashlib
import math
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from urllib.parse import urlencode

from sqlalchemy.orm import Session

from ringleader.errors import InvalidSpec
from ringleader.server import phases
from ringleader.server.models import User, Workload
from ringleader.server.schemas import WorkloadOut
from ringleader.server.services import views
from ringleader.server.services.workload_intents import may_resume, may_suspend
from ringleader.server.services.workload_list import MAX_OFFSET, TotalOf, list_workloads
from ringleader.server.snapshot import holds, pod_asks

PAGE_SIZES = (10, 25, 50, 100, 200)
DEFAULT_SIZE = 50
# A column's key in the URL -> the list logic's sortBy field.  The columns that show
# two figures sort by the first: running pods (what moves), GPUs and CPU requested
# (what the spec asks; their allocation follows it while the workload runs).
SORTS = {
    "name": "name",
    "type": "framework",
    "status": "phase",
    "project": "projectName",
    "createdBy": "createdBy",
    "pods": "runningPods",
    "gpu": "requestedGpus",
    "cpu": "requestedCpuCores",
    "created": "createdAt",
    "completed": "completedAt",
}
# The table's columns: (sort key or None, header, what its figures are).
COLUMNS = (
    ("name", "Workload", ""),
    ("type", "Type", ""),
    ("status", "Status", ""),
    ("project", "Project", ""),
    ("createdBy", "Created by", ""),
    ("pods", "Pods", "running / requested"),
    ("gpu", "GPU", "requested / allocated"),
    ("cpu", "CPU cores", "requested / allocated"),
    ("created", "Created", ""),
    ("completed", "Completed", ""),
    (None, "Actions", ""),
)
# The narrow layout's "Sort by" choices: a column of two figures says which one sorts.
SORT_LABELS = tuple(
    (key, f"{label} ({unit.split(' / ')[0]})" if unit else label)
    for key, label, unit in COLUMNS
    if key
)
# The statuses a user can filter by (every phase a live workload can be in).
STATUSES = tuple(p for p in phases.WORKLOAD_PHASES if p != "Deleted")
PARAMS = ("project", "status", "search", "sort", "order", "page", "size")
LIVE_PARAMS = ("version", "have")  # what the live update adds: what the browser shows
_LARGEST_FIRST = frozenset({"created", "completed", "pods", "gpu", "cpu"})  # newest, biggest
MAX_SEARCH = 100  # characters: a workload name has at most 63
_SEARCHABLE = re.compile(r"^[a-z0-9-]*$")


@dataclass(frozen=True)
class PageQuery:
    """The page's GET parameters, checked; ``url`` makes links that keep them."""

    project: str = ""  # a project name
    status: str = ""
    search: str = ""
    sort: str = "created"
    order: str = "desc"
    page: int = 1
    size: int = DEFAULT_SIZE

    @property
    def searchable(self) -> bool:
        """Whether a workload name could contain the search (lowercase letters,
        digits and '-'); a search that cannot match finds nothing, not an error."""
        return bool(_SEARCHABLE.match(self.search))

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> PageQuery:
        """The query from ``params``; InvalidSpec naming the parameter when one is bad.
        Unknown parameters are errors (a typo must not silently show everything)."""
        unknown = sorted(set(params) - set(PARAMS) - set(LIVE_PARAMS))
        if unknown:
            raise InvalidSpec(f"unknown parameter; use {', '.join(PARAMS)}", unknown[0])
        status = params.get("status", "")
        if status and status not in STATUSES:
            raise InvalidSpec(
                f"{status[:40]!r} is no status; choose one of " + ", ".join(STATUSES), "status"
            )
        search = params.get("search", "").strip().lower()
        if len(search) > MAX_SEARCH or not search.isprintable():
            raise InvalidSpec(f"at most {MAX_SEARCH} printable characters", "search")
        sort = params.get("sort", "created")
        if sort not in SORTS:
            raise InvalidSpec("choose one of " + ", ".join(SORTS), "sort")
        order = params.get("order", "desc")
        if order not in ("asc", "desc"):
            raise InvalidSpec("must be asc or desc", "order")
        size = _integer(params, "size", DEFAULT_SIZE)
        if size not in PAGE_SIZES:
            raise InvalidSpec("choose one of " + ", ".join(map(str, PAGE_SIZES)), "size")
        page = _integer(params, "page", 1)
        if not 1 <= page <= MAX_OFFSET // size:
            raise InvalidSpec("must be a page number from 1", "page")
        project = params.get("project", "")
        if len(project) > 255:
            raise InvalidSpec("no project has so long a name", "project")
        return cls(project, status, search, sort, order, page, size)

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.size

    @property
    def filtered(self) -> bool:
        return bool(self.project or self.status or self.search)

    def url(self, **changes: object) -> str:
        """``/workloads?...`` with this query's non-default values and ``changes``."""
        query = replace(self, **changes)  # type: ignore[arg-type]
        default = PageQuery()
        pairs = {k: getattr(query, k) for k in PARAMS if getattr(query, k) != getattr(default, k)}
        return "/workloads" + (f"?{urlencode(pairs)}" if pairs else "")

    def sort_url(self, column: str) -> str:
        """The link of a column's header: sort by it, or flip its order if it is the sort."""
        if column == self.sort:
            return self.url(order="asc" if self.order == "desc" else "desc", page=1)
        first = "desc" if column in _LARGEST_FIRST else "asc"
        return self.url(sort=column, order=first, page=1)

    def aria_sort(self, column: str) -> str:
        if column != self.sort:
            return "none"
        return "ascending" if self.order == "asc" else "descending"


def _integer(params: Mapping[str, str], name: str, default: int) -> int:
    raw = params.get(name, "")
    if raw == "":
        return default
    if not raw.isdigit() or len(raw) > 19:
        raise InvalidSpec(f"{raw[:20]!r} is not a whole number", name)
    return int(raw)


@dataclass
class Row:
    """One workload as the table shows it: the API's view plus CPU and actions."""

    view: WorkloadOut
    cpu_requested: float
    cpu_allocated: float
    actions: frozenset[str]
    version: str  # ``row_version``: the live update sends only rows the browser lacks

    @property
    def connect(self) -> str:
        """The CLI command that opens a shell in its master pod (``ringleader bash``)."""
        return shlex.join(
            ["ringleader", "bash", self.view.name, "--project", self.view.project_name]
        )


@dataclass
class Page:
    query: PageQuery
    rows: list[Row]
    total: int
    projects: list[str]
    version: str
    problem: str | None = None
    problem_field: str | None = None
    pages: int = field(init=False)

    def __post_init__(self) -> None:
        self.pages = max(1, math.ceil(self.total / self.query.size))

    @property
    def range_text(self) -> str:
        return range_text(self.query.offset, len(self.rows), self.total)


def range_text(offset: int, shown: int, total: int) -> str:
    """``1–50 of 10,000`` (or ``0 workloads``)."""
    if not total or not shown:
        return f"{total:,} workloads" if total != 1 else "1 workload"
    return f"{offset + 1:,}–{offset + shown:,} of {total:,}"


def actions(row: Workload) -> frozenset[str]:
    """What the user may ask of ``row`` in its phase (the services say the same)."""
    phase = row.phase
    found = {"copy"}
    if may_suspend(phase, row.desired_phase):
        found.add("stop")
    if may_resume(phase, row.desired_phase):
        found.add("run")
    if phase != "Deleting":
        found.add("delete")
    if phase == "Running":
        found.add("connect")
    return frozenset(found)


def visible_project_names(session: Session, user: User) -> dict[str, str]:
    """Name -> id of the projects ``user`` may see, by name (the project select)."""
    return {p.name: p.id for p in views.projects(session, user)}


def page_filters(query: PageQuery, projects: dict[str, str]) -> list[str] | None:
    """The list logic's filters for ``query``; None when nothing can match."""
    filters = []
    if query.project:
        if query.project not in projects:
            raise InvalidSpec(f"no project {query.project[:60]!r} that you can see", "project")
        filters.append(f"projectId=={projects[query.project]}")
    if query.status:
        filters.append(f"phase=={query.status}")
    if query.search and not query.searchable:
        return None  # no name holds a space, "_" or "*": nothing matches
    if query.search:
        filters.append(f"name=@{query.search}")
    return filters


def page_rows(
    session: Session, user: User, query: PageQuery, total_of: TotalOf | None = None
) -> tuple[list[Workload], int, dict[str, str]]:
    """The page's workload rows (pods loaded) and the total, by the API's list logic
    (``total_of``: the page's shared totals, ``workload_list.page_select``)."""
    projects = visible_project_names(session, user)
    filters = page_filters(query, projects)
    if filters is None:
        return [], 0, projects
    rows, total = list_workloads(
        session,
        user,
        filters=filters,
        sort_by=SORTS[query.sort],
        sort_order=query.order,
        offset=query.offset,
        limit=query.size,
        total_of=total_of,
    )
    return rows, total, projects


def row_version(row: Workload) -> str:
    """A short digest of what a row shows: changes with the workload or any of its pods
    (every change moves their ``updated_at``); unique on a page (it covers the id)."""
    pods = ((p.id, p.phase, p.updated_at) for p in row.pods)
    return row_version_of(row.id, row.phase, row.updated_at, pods)


def row_version_of(
    workload_id: str,
    phase: str,
    updated_at: datetime,
    pods: Iterable[tuple[str, str, datetime]],
) -> str:
    """``row_version`` from the columns alone (its pods in ``Workload.pods``' order)."""
    digest = hashlib.sha256(f"{workload_id}:{phase}:{updated_at.isoformat()}".encode())
    for pod_id, pod_phase, pod_updated in pods:
        digest.update(f";{pod_id}:{pod_phase}:{pod_updated.isoformat()}".encode())
    return digest.hexdigest()[:10]


def version(total: int, row_versions: list[str]) -> str:
    """A short digest of the whole page: its rows' versions, in order, and the total."""
    joined = ".".join(row_versions)
    return hashlib.sha256(f"{total}|{joined}".encode()).hexdigest()[:16]


def to_rows(session: Session, rows: list[Workload], *, cluster_id: str = "") -> list[Row]:
    """The table's rows: each workload's API view (two name queries and one phase
    query for the whole page) with its CPU asked and held."""
    names = views.workload_names(session, rows)
    changed = views.phase_changes(session, rows)
    out = []
    for row in rows:
        requests = {r.name: r for r in pod_asks(row).requests}
        held = sum(
            requests[p.name].cpu_cores for p in row.pods if p.name in requests and holds(row, p)
        )
        out.append(
            Row(
                view=views.workload_out(
                    session, row, names, full=False, cluster_id=cluster_id, changed=changed
                ),
                cpu_requested=round(row.requested_cpu_cores, 3),  # stored at submit
                cpu_allocated=round(held, 3),
                actions=actions(row),
                version=row_version(row),
            )
        )
    return out


def workloads_page(
    session: Session,
    user: User,
    query: PageQuery,
    *,
    cluster_id: str = "",
    total_of: TotalOf | None = None,
) -> Page:
    """The page for ``query``; past the last page, the last page."""
    rows, total, projects = page_rows(session, user, query, total_of)
    if not rows and total and query.page > 1:
        query = replace(query, page=max(1, math.ceil(total / query.size)))
        rows, total, projects = page_rows(session, user, query, total_of)
    shown = to_rows(session, rows, cluster_id=cluster_id)
    return Page(
        query=query,
        rows=shown,
        total=total,
        projects=sorted(projects),
        version=version(total, [r.version for r in shown]),
    )

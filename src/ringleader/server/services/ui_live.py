"""The workloads page's live update under many viewers: what a page holds (its rows'
ids and versions, the total) read from columns alone (``live_state``) and shared for
``LIVE_TTL_S`` between viewers who see the same projects (``LiveCache``); and the
list's totals, shared the same way by every page render and live update.

Why: each open page polls every 2 s (static/app.js); 200 of them loading a page of 50
workloads whole, with their pods and the pods' JSON, took ~20 ms of the server's CPU
each, a hundred times a second (issue 27, item 6).

Invariants:
- a ``LiveState`` is the page's own: the same version and row versions as
  ``ui_workloads.workloads_page`` builds from whole rows (a test compares them);
- viewers share a state only when they see the same projects (an admin not confined
  to a pod's project sees all): a page never shows another's rows;
- a shared state is at most ``LIVE_TTL_S`` old; a row that changed after it was read is
  read again before it is sent (``workloads_page.live``);
- a row's HTML is built once per (row version, page it returns to) and served to every
  viewer with their own CSRF token put in: a row's version covers all the row shows
  (its phase, actions and pods follow its own and its pods' ``updated_at``);
- a total (of the same filters, for viewers of the same projects: any page, any sort)
  is counted again once ``LIVE_TTL_S`` old or as soon as this server commits a change
  to a workload (``workload_changes``): counting 100,000 workloads cost 10-20 ms of
  each page on PostgreSQL, and a user who submits sees the new total at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from ringleader.server.auth import pod_project
from ringleader.server.models import Pod, User, Workload
from ringleader.server.services.ui_workloads import (
    SORTS,
    PageQuery,
    page_filters,
    row_version_of,
    version,
    visible_project_names,
)
from ringleader.server.services.workload_changes import WorkloadChanges
from ringleader.server.services.workload_list import TotalOf, page_select


@dataclass(frozen=True)
class LiveState:
    """What a page holds now: its rows' ids and versions in order, the total, its version."""

    ids: tuple[str, ...]
    order: tuple[str, ...]
    total: int
    version: str


def live_state(
    session: Session, user: User, query: PageQuery, total_of: TotalOf | None = None
) -> LiveState:
    """The page's ``LiveState`` from columns alone: the page's query reads ids, phases and
    times, one more query its pods'; no row becomes an object (a page of 50 loaded whole,
    with pods and their JSON, cost ~20 ms of CPU on each 2-second poll of each viewer)."""
    projects = visible_project_names(session, user)
    filters = page_filters(query, projects)
    if filters is None:
        return LiveState((), (), 0, version(0, []))
    page, total = page_select(
        session,
        user,
        filters=filters,
        sort_by=SORTS[query.sort],
        sort_order=query.order,
        offset=query.offset,
        limit=query.size,
        total_of=total_of,
    )
    columns = (Workload.id, Workload.phase, Workload.updated_at)
    rows = session.execute(page.with_only_columns(*columns, maintain_column_froms=True)).all()
    ids = tuple(r[0] for r in rows)
    pods: dict[str, list[tuple[str, str, datetime]]] = {i: [] for i in ids}
    if ids:
        found = session.execute(
            select(Pod.workload_id, Pod.id, Pod.phase, Pod.updated_at)
            .where(Pod.workload_id.in_(ids))
            .order_by(Pod.workload_id, Pod.name)  # Workload.pods' order
        )
        for workload_id, pod_id, phase, updated in found:
            pods[workload_id].append((pod_id, phase, updated))
    order = tuple(row_version_of(i, phase, at, pods[i]) for i, phase, at in rows)
    return LiveState(ids, order, total, version(total, list(order)))


def load_rows(session: Session, ids: Sequence[str]) -> list[Workload]:
    """The workloads ``ids`` (pods loaded), in that order; gone ones left out."""
    if not ids:
        return []
    found = session.scalars(
        select(Workload).where(Workload.id.in_(ids)).options(selectinload(Workload.pods))
    )
    by_id = {w.id: w for w in found}
    return [by_id[i] for i in ids if i in by_id]


LIVE_TTL_S = 1.0  # how old a page's shared LiveState may be: half the browsers' poll
ROW_HTML_KEPT = 4096  # rows' HTML kept for every viewer (a few MB at most)
# Where a row's HTML has the session's CSRF token: each answer puts its own in.
CSRF_MARK = "rlcsrfmark0000000000000000000000"


class LiveCache:
    """Each page's ``LiveState``, shared for LIVE_TTL_S by every viewer who sees the
    same projects and asks the same query: 200 browsers polling one page every 2 s
    make one read of it a second, not a hundred. A viewer sees a change at most
    LIVE_TTL_S later than it would alone (what the live update is for: seconds)."""

    def __init__(self, changes: WorkloadChanges | None = None) -> None:
        self._states: dict[Hashable, tuple[float, LiveState]] = {}
        self._rows: dict[tuple[str, str], str] = {}  # (row version, back link) -> HTML
        # (viewers, filters) -> (when counted, changes' generation then, total)
        self._totals: dict[Hashable, tuple[float, int, int]] = {}
        self._changes = changes or WorkloadChanges()
        self._lock = threading.Lock()

    def total_of(self, session: Session, user: User, viewers: Hashable | None = None) -> TotalOf:
        """``user``'s ``workload_list.TotalOf``: totals shared with every viewer of the
        same projects while younger than LIVE_TTL_S and no workload changed since
        (``viewers``: ``self.viewers`` of the user, when the caller has it already)."""
        if viewers is None:
            viewers = self.viewers(session, user)

        def total(filters: tuple[str, ...], count: Callable[[], int]) -> int:
            key = (viewers, filters)
            generation = self._changes.generation  # before counting: a commit meanwhile
            now = time.monotonic()  # makes what is counted here stale at once
            with self._lock:
                hit = self._totals.get(key)
            if hit is not None and now - hit[0] < LIVE_TTL_S and hit[1] == generation:
                return hit[2]
            counted = count()
            with self._lock:
                self._totals[key] = (now, generation, counted)
                if len(self._totals) > 256:  # forget what nobody asked for lately
                    for old in [k for k, (t, _, _) in self._totals.items() if now - t > LIVE_TTL_S]:
                        del self._totals[old]
            return counted

        return total

    def row_html(self, row_version: str, back: str) -> str | None:
        """A row's HTML as built for another viewer (its version covers all it shows;
        ``back`` is the page it returns to), with CSRF_MARK for the token."""
        with self._lock:
            return self._rows.get((row_version, back))

    def keep_row_html(self, row_version: str, back: str, html: str) -> str:
        with self._lock:
            if len(self._rows) >= ROW_HTML_KEPT:  # the oldest half goes (dicts keep order)
                for key in list(self._rows)[: ROW_HTML_KEPT // 2]:
                    del self._rows[key]
            self._rows[(row_version, back)] = html
        return html

    def state(self, session: Session, user: User, query: PageQuery) -> LiveState:
        key = self.key(session, user, query)
        now = time.monotonic()
        with self._lock:
            hit = self._states.get(key)
        if hit is not None and now - hit[0] < LIVE_TTL_S:
            return hit[1]
        return self.put(key, self._read(session, user, query, key), now)

    def fresh(self, session: Session, user: User, query: PageQuery) -> LiveState:
        """Read again now (a row changed since the shared state was read)."""
        key = self.key(session, user, query)
        return self.put(key, self._read(session, user, query, key), time.monotonic())

    def _read(
        self, session: Session, user: User, query: PageQuery, key: tuple[Hashable, PageQuery]
    ) -> LiveState:
        return live_state(session, user, query, self.total_of(session, user, viewers=key[0]))

    def put(self, key: Hashable, state: LiveState, now: float) -> LiveState:
        with self._lock:
            self._states[key] = (now, state)
            if len(self._states) > 256:  # forget pages nobody polled lately
                for old in [k for k, (t, _) in self._states.items() if now - t > LIVE_TTL_S]:
                    del self._states[old]
        return state

    @classmethod
    def key(cls, session: Session, user: User, query: PageQuery) -> tuple[Hashable, PageQuery]:
        """Who sees the same page: ``viewers``, asking the same query."""
        return (cls.viewers(session, user), query)

    @staticmethod
    def viewers(session: Session, user: User) -> Hashable:
        """Who sees the same workloads: an admin (not confined to a pod's project) sees
        all; anyone else, what their projects hold."""
        if user.is_admin and pod_project(session) is None:
            return "all"
        return frozenset(visible_project_names(session, user).values())

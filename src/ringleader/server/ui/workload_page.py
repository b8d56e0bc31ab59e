"""One workload's page: spec, pods, events, live logs and charts, at /workloads/{id}."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(include_in_schema=False)

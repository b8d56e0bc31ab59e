"""The new-workload wizard (seed 002's path), at /workloads/new."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(include_in_schema=False)

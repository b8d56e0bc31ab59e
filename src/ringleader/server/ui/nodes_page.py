"""The nodes page: resources, allocation per GPU, readiness, pool and kind."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(include_in_schema=False)

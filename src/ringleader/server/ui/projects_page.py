"""The projects page: quotas per pool, allocation and fair share as bars."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(include_in_schema=False)

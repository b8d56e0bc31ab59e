"""``Wire``: the base of every wire model, and the text pattern they share.

Why apart from ``schemas``: the wire models are split by subject (``schemas``,
``user_schemas``, ``asset_schemas`` ...) and every one derives from ``Wire``;
a module of its own lets each import it without importing the others (no
import cycle).  ``schemas`` re-exports both names.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Wire(BaseModel):
    # No inf/NaN (JSON's 1e999): no database JSON column stores them faithfully.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, allow_inf_nan=False)


# Text PostgreSQL can compare with: its text types cannot hold NUL (a query with one raises).
NO_NUL = r"^[^\x00]+$"

"""Tables that fit the terminal, and ``--output json|yaml|wide``.

Nomenclature: a *column* (``Column``) is a header, how to get a row's cell,
and a *rank*: when a table is wider than the terminal, columns of the lowest
rank go first.  A column ranked ``KEEP`` is never dropped; ``wrap`` columns
(free text: reasons, messages) wrap over lines instead of widening the table.

Invariants:
- a cell is never cut: a column that does not wrap shows every cell whole
  (its minimum width is its longest cell), and the table drops low-ranked
  columns until its minimum fits the width, so no cell is ever ellipsized
  (``Comple…``) the way rich shrinks a table that does not fit;
- long headers break over two lines (``GPUs Allocated`` / ``(Requested)``)
  before any column is dropped, since a header is as wide as its column;
- ``wide`` keeps every column and lets the table be as wide as its content
  (kubectl's ``-o wide``: the terminal wraps the lines);
- ``json``/``yaml`` print the API's own objects, camelCase, for scripts.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

KEEP = 1000  # the rank of a column that is never dropped
WRAP_MIN = 24  # the narrowest a wrapping column gets before columns are dropped
UNBOUNDED = 10**5  # a width no table reaches: to measure a table's natural size
R = TypeVar("R")


class Output(str, enum.Enum):
    """``-o``: a table for the terminal (default), every column (wide), or data."""

    wide = "wide"
    json = "json"
    yaml = "yaml"


def output_option(value: str | None) -> Output | None:
    """``-o``'s value checked (Typer's callback): a clear usage error otherwise."""
    if value is None:
        return None
    try:
        return Output(value.lower())
    except ValueError:
        import typer

        choices = ", ".join(o.value for o in Output)
        raise typer.BadParameter(f"{value!r} is not one of {choices}") from None


@dataclass(frozen=True)
class Column(Generic[R]):
    header: str
    cell: Callable[[R], str | Text]
    rank: int = KEEP
    wrap: bool = False
    short: str | None = None  # the header in two lines, for a narrow terminal


def fit_table(
    console: Console,
    columns: Sequence[Column[R]],
    rows: Sequence[R],
    *,
    wide: bool = False,
    title: str | None = None,
) -> tuple[Table, list[Column[R]]]:
    """The table of ``rows`` that fits ``console``'s width without cutting a cell,
    and the columns it kept (a caller may show what was dropped another way)."""
    cells = [[column.cell(row) for column in columns] for row in rows]
    kept = list(range(len(columns)))
    # A column that does not wrap is as wide as its widest cell: rich would measure its
    # longest word instead, and cut the rest ("Comple…") when the table is too wide.
    widest = [max((_width(row[i]) for row in cells), default=0) for i in kept]

    def build(short: bool) -> Table:
        table = Table(box=None, title=title, title_justify="left", title_style="bold")
        for i in kept:
            column = columns[i]
            header = column.short if short and column.short else column.header
            table.add_column(
                header,
                no_wrap=not column.wrap,
                overflow="fold",
                min_width=(
                    (WRAP_MIN if not wide else None)
                    if column.wrap
                    else max(widest[i], _width(header))
                ),
            )
        for row in cells:
            table.add_row(*(row[i] for i in kept))
        return table

    if wide:
        return build(short=False), list(columns)
    width = console.width
    for short in (False, True):
        table = build(short)
        if _minimum(console, table) <= width:
            return table, [columns[i] for i in kept]
    while True:
        droppable = [i for i in kept if columns[i].rank < KEEP]
        table = build(short=True)
        if not droppable or _minimum(console, table) <= width:
            return table, [columns[i] for i in kept]
        kept.remove(min(droppable, key=lambda i: (columns[i].rank, -i)))


def _width(cell: str | Text) -> int:
    """The columns the widest line of ``cell`` takes."""
    text = cell.plain if isinstance(cell, Text) else cell
    return max((cell_len(line) for line in text.splitlines()), default=0)


def _minimum(console: Console, table: Table) -> int:
    """The narrowest ``table`` renders without cutting a cell that does not wrap."""
    return console.measure(table, options=console.options.update_width(UNBOUNDED)).minimum


def fits(console: Console, table: Table) -> bool:
    """``table`` shows every cell whole at ``console``'s width."""
    return _minimum(console, table) <= console.width


def print_table(console: Console, table: RenderableType, *, wide: bool = False) -> None:
    """Print a table; ``wide``: at its natural width, however wide the terminal is."""
    if not wide:
        console.print(table)
        return
    natural = console.measure(table, options=console.options.update_width(UNBOUNDED)).maximum
    narrow = console.width
    console.width = max(natural, narrow)  # rich caps print(width=) at the console's own
    try:
        console.print(table, crop=False)
    finally:
        console.width = narrow


def plain(value: Any) -> Any:
    """``value`` as JSON-able data: models as the API writes them (camelCase)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def print_data(value: Any, output: Output) -> None:
    """Print ``value`` as JSON or YAML on stdout, whole (never wrapped to a width)."""
    data = plain(value)
    if output == Output.yaml:
        import yaml

        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=UNBOUNDED)
    else:
        text = json.dumps(data, indent=2) + "\n"
    sys.stdout.write(text)
    sys.stdout.flush()

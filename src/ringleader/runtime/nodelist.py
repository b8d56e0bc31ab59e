"""Expand Slurm's compressed host lists and task counts without calling ``scontrol``.

A runtime must not shell out to ``scontrol show hostnames`` (absent inside many
containers), so the two compressed forms Slurm puts in the environment are parsed
here:

    host list        ``n[1-3,5]`` -> n1 n2 n3 n5;  ``a1,b[01-02]`` -> a1 b01 b02;
                     several bracket groups multiply out: ``r[1-2]n[1-2]`` -> r1n1 r1n2 ...
    tasks per node   ``2(x3),1`` -> 2 2 2 1

Zero padding follows the range's first number (``[08-10]`` -> 08 09 10), as Slurm does.
Order is preserved: the first host is where rank 0 runs.
"""

from __future__ import annotations

import itertools
import re

__all__ = ["expand_nodelist", "expand_tasks_per_node"]

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ValueError("nested brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced ']'")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError("unbalanced '['")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _expand_ranges(body: str) -> list[str]:
    """``1-3,5`` -> ``['1', '2', '3', '5']``, keeping the zero padding of each range."""
    out: list[str] = []
    for item in body.split(","):
        match = _RANGE.fullmatch(item.strip())
        if not match:
            raise ValueError(f"bad range {item!r}")
        lo, hi = match.group(1), match.group(2) or match.group(1)
        if int(hi) < int(lo):
            raise ValueError(f"descending range {item!r}")
        width = len(lo)
        out.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return out


def _expand_item(item: str) -> list[str]:
    pieces: list[list[str]] = []
    for text, body in re.findall(r"([^\[\]]*)(?:\[([^\]]*)\])?", item):
        if text:
            pieces.append([text])
        if body:
            pieces.append(_expand_ranges(body))
    return ["".join(combo) for combo in itertools.product(*pieces)]


def expand_nodelist(nodelist: str) -> list[str]:
    """All host names of a Slurm node list, in order; raises ValueError if malformed."""
    hosts: list[str] = []
    for item in _split_top_level(nodelist.strip()):
        hosts.extend(_expand_item(item))
    if not hosts:
        raise ValueError("empty node list")
    return hosts


def expand_tasks_per_node(spec: str) -> list[int]:
    """Per-node task counts from ``SLURM_TASKS_PER_NODE`` (``2(x3),1``), in node order."""
    counts: list[int] = []
    for item in spec.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if not match:
            raise ValueError(f"bad tasks-per-node item {item!r}")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts

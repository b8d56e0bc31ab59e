"""A user's test hosts' *state directory* (``<home>/testhosts``): where it is, that only
root can change it and those above it, and its making, exclusively.

Kept apart from ``kept`` so that each reads whole: there, ``up`` and ``down`` (tags,
claims, the network made and removed); here, the checks that make it safe for root
to write keys and scripts it later runs, and to read back what decides what it
kills.  Together they were past the house's 400 lines.

Invariants (``kept``'s, for the directory):
* the state directory and every directory above it can be changed by root alone
  (``paths.changeable_by_others``), else ``UnsafeHome`` before anything is written
  or read there;
* what is missing of it is made exclusively (0700, root's), so only root writes in
  it; an existing one is used only when it is an empty leftover of ours;
* its path has the links on the way to it resolved: what is checked is what root
  then uses.
"""

from __future__ import annotations

import os
from pathlib import Path

from ringleader.cluster.testhosts.paths import changeable_by_others, is_ours, make_private_dir
from ringleader.errors import Conflict, InvalidSpec


class UnsafeHome(InvalidSpec):
    """The state directory, or one above it, can be changed by a user other than root:
    root would write keys and scripts it runs where that user could swap them."""

    def __init__(self, directory: Path, where: Path, why: str) -> None:
        super().__init__(
            f"{directory} is not safe for root to use: {where} {why}, so a user other"
            " than root could replace what root writes and runs there"
            "\n  fix: set RINGLEADER_HOME to a directory that only root can change (the"
            " default for root, /root/.ringleader, is), e.g. in a root shell: sudo -i",
            "RINGLEADER_HOME",
        )


def check_safe(directory: Path) -> None:
    """``UnsafeHome`` unless only root can change ``directory`` and those above it."""
    problem = changeable_by_others(directory)
    if problem is not None:
        raise UnsafeHome(directory, *problem)


def state_dir(home: Path) -> Path:
    """Where ``up`` writes everything and ``down`` looks: ``<home>/testhosts``, with the
    links on the way to it resolved (what is checked is what root then uses)."""
    return Path(os.path.realpath(home)) / "testhosts"


def make_state_dir(directory: Path) -> None:
    """Make ``directory`` and what is missing above it, each exclusively (0700), after
    checking that only root can change those that exist, and check all once made.
    An empty leftover of ours (root's, 0700) is made anew; anything else refuses."""
    check_safe(directory)
    missing = [p for p in (directory, *directory.parents) if not os.path.lexists(p)]
    try:
        for path in reversed(missing):
            make_private_dir(path)
    except FileExistsError as exc:  # made meanwhile, by another process
        check_safe(directory)  # another user's: say so, as such
        raise Conflict(
            f"{exc.filename} {exc.strerror}\n  fix: move it away, or set RINGLEADER_HOME to"
            " another directory"
        ) from None
    if directory not in missing:
        what = (
            "holds files that `ringleader testhosts up` did not write"
            if is_ours(directory)
            else "is not a directory `ringleader testhosts up` made (root's, mode 0700)"
        )
        if not (is_ours(directory) and _empty(directory)):
            raise Conflict(
                f"{directory} {what}\n  fix: move it away, or set RINGLEADER_HOME to another"
                " directory"
            )
        make_private_dir(directory, leftover_ok=True)
    check_safe(directory)


def _empty(path: Path) -> bool:
    try:
        return not any(os.scandir(path))
    except OSError:
        return False

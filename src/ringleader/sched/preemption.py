"""Choosing whom to preempt: the fewest, newest workloads whose end makes room.

Nomenclature:
- *reclaim*: taking resources back from another project that is above its
  fair share, for a workload within its own deserved quota or fair share;
- *priority preemption*: within one project, a higher priority class stops
  a lower, preemptible one;
- *candidates*: running preemptible workloads, in the order they are given
  up: reclaim before priority preemption, then lowest priority, newest first.

Invariants: a victim is always a whole running preemptible workload (the
caller lists only those); every trial here is rolled back, and only the set
returned is then applied by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from typing import TYPE_CHECKING

from ringleader.sched.model import Workload
from ringleader.sched.state import CycleState

if TYPE_CHECKING:
    from ringleader.sched.deferral import DeferredReleases

# Trying each candidate alone finds a one-victim answer when there is one;
# past this many candidates the greedy pass alone decides (bounded work).
SINGLE_TRIALS = 32


@dataclass(frozen=True, eq=False)
class Candidate:
    workload: Workload
    reclaim: bool  # True: another project's; False: a lower priority of the same project


def in_giving_up_order(workloads: Iterable[Workload]) -> list[Workload]:
    """Lowest priority first, then newest (ties: the larger id)."""
    by_id = sorted(workloads, key=lambda w: w.id, reverse=True)
    return sorted(by_id, key=lambda w: (w.priority, -w.submitted_at))


def choose_victims(
    state: CycleState,
    candidates: Iterable[Candidate],
    eligible: Callable[[Candidate], bool],
    fits: Callable[[], bool],
    still_misses: Callable[[Candidate], bool] | None = None,
    surely_fits: Callable[[Candidate], bool] | None = None,
    deferral: DeferredReleases | None = None,
) -> list[Candidate] | None:
    """The fewest (then newest) candidates whose release lets ``fits()`` pass.

    ``candidates`` come in giving-up order and are drawn only as far as
    needed; ``eligible`` is asked against the state as simulated so far (a
    reclaim victim's project must still be above its fair share); ``fits``
    must undo whatever it tries.  ``still_misses(c)``, when given, is asked
    right after ``c`` is released on top of a state where ``fits()`` was last
    False, and True only where it is sure ``fits()`` would still be False
    (then the greedy pass does not ask ``fits()``); it may always say False.
    ``surely_fits(c)``, likewise, is True only where ``fits()`` surely passes
    without ``c`` (see ``_fewest``).  ``deferral``, when given, may give back
    only a candidate's quota where its nodes cannot matter (``sched.deferral``);
    those still deferred when the workload fits are left out of the answer.
    """
    stream = iter(candidates)
    head = list(islice(stream, SINGLE_TRIALS))  # (read here, so a test may lower it)
    for candidate in head:
        if eligible(candidate) and _fits_without(state, [candidate], fits):
            return [candidate]
    mark = state.mark()
    chosen: list[Candidate] = []
    marks: list[int] = []  # marks[i]: the mark just before chosen[i] was released
    found = False
    for candidate in chain(head, stream):
        if not eligible(candidate):
            continue
        if chosen and deferral is not None and deferral.defer(candidate):
            chosen.append(candidate)  # fits() was False just before, and still is
            continue
        marks.append(state.mark())
        if deferral is not None:
            deferral.give_back(candidate)
        state.release(candidate.workload)
        chosen.append(candidate)
        if len(chosen) > 1 and still_misses is not None and still_misses(candidate):
            continue  # fits() was False just before, and this release cannot change it
        if fits():
            found = True
            break
    if not found:
        state.rollback(mark)
        return None
    if deferral is not None and deferral.used:
        # Deferred victims are dropped; the rest start again from the state as it
        # was (a victim given back late broke the marks' order).
        chosen = [c for c in chosen if not deferral.is_pending(c)]
        state.rollback(mark)
        return _fewest(state, chosen, fits, surely_fits)
    return _fewest(state, chosen, fits, surely_fits, marks)


def _fewest(
    state: CycleState,
    chosen: list[Candidate],
    fits: Callable[[], bool],
    surely_fits: Callable[[Candidate], bool] | None = None,
    marks: list[int] | None = None,
) -> list[Candidate]:
    """Drop each candidate, oldest first, that ``fits()`` can do without.

    Each trial is ``fits()`` after releasing the others in ``chosen`` order
    from the state as it was, exactly as if done afresh, but the released
    prefix before the candidate is kept between trials (each release with
    the mark before it) and only rolled back as far as the next trial needs.
    Candidates come in giving-up order, newest first, and are dropped oldest
    first, so the next candidate is mostly the one just before the last:
    each trial costs a release or two, not all of ``chosen`` again.

    ``surely_fits(candidate)`` is asked with the prefix before the candidate
    released (the trial would release the rest on top): where it is sure the
    trial passes, the candidate is dropped without one.

    ``marks``, when given, says ``chosen`` is released already (the greedy
    pass's state), ``marks[i]`` taken just before ``chosen[i]`` was: the first
    trials roll back to them rather than release it all again.
    """
    chosen = list(chosen)
    # chosen[:len(marks)] is released, marks[i] taken just before chosen[i] was: a
    # drop at ``at`` (the prefix's end) leaves the prefix as it is.
    marks = [] if marks is None else list(marks)
    base = marks[0] if marks else state.mark()
    for candidate in sorted(chosen, key=lambda c: (c.workload.submitted_at, c.workload.id)):
        if len(chosen) < 2:
            break  # the last one left is never dropped
        at = chosen.index(candidate)  # Candidate compares by identity (eq=False)
        if at < len(marks):
            state.rollback(marks[at])
            del marks[at:]
        for other in chosen[len(marks) : at]:
            marks.append(state.mark())
            state.release(other.workload)
        if surely_fits is not None and surely_fits(candidate):
            del chosen[at]
            continue
        trial = state.mark()
        for other in chosen[at + 1 :]:
            state.release(other.workload)
        dropped = fits()
        state.rollback(trial)
        if dropped:
            del chosen[at]
    state.rollback(base)
    return chosen


def _fits_without(
    state: CycleState, victims: Sequence[Candidate], fits: Callable[[], bool]
) -> bool:
    mark = state.mark()
    for victim in victims:
        state.release(victim.workload)
    result = fits()
    state.rollback(mark)
    return result

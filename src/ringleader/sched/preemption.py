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

from ringleader.sched.model import Workload
from ringleader.sched.state import CycleState

# Trying each candidate alone finds a one-victim answer when there is one;
# past this many candidates the greedy pass alone decides (bounded work).
SINGLE_TRIALS = 32


@dataclass(frozen=True)
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
) -> list[Candidate] | None:
    """The fewest (then newest) candidates whose release lets ``fits()`` pass.

    ``candidates`` come in giving-up order and are drawn only as far as
    needed; ``eligible`` is asked against the state as simulated so far (a
    reclaim victim's project must still be above its fair share); ``fits``
    must undo whatever it tries.
    """
    stream = iter(candidates)
    head = list(islice(stream, SINGLE_TRIALS))
    for candidate in head:
        if eligible(candidate) and _fits_without(state, [candidate], fits):
            return [candidate]
    mark = state.mark()
    chosen: list[Candidate] = []
    found = False
    for candidate in chain(head, stream):
        if not eligible(candidate):
            continue
        state.release(candidate.workload)
        chosen.append(candidate)
        if fits():
            found = True
            break
    state.rollback(mark)
    if not found:
        return None
    return _fewest(state, chosen, fits)


def _fewest(
    state: CycleState, chosen: list[Candidate], fits: Callable[[], bool]
) -> list[Candidate]:
    """Drop each candidate, oldest first, that ``fits()`` can do without.

    Each trial is ``fits()`` after releasing the others in ``chosen`` order
    from the state as it was, exactly as if done afresh, but the released
    prefix before the candidate is kept between trials (each release with
    the mark before it) and only rolled back as far as the next trial needs.
    Candidates come in giving-up order, newest first, and are dropped oldest
    first, so the next candidate is mostly the one just before the last:
    each trial costs a release or two, not all of ``chosen`` again.
    """
    base = state.mark()
    released: list[tuple[Candidate, int]] = []  # a prefix of chosen, with marks
    for candidate in sorted(chosen, key=lambda c: (c.workload.submitted_at, c.workload.id)):
        if len(chosen) < 2:
            break  # the last one left is never dropped
        at = next(i for i, c in enumerate(chosen) if c is candidate)
        keep = 0
        while keep < min(at, len(released)) and released[keep][0] is chosen[keep]:
            keep += 1
        if keep < len(released):
            state.rollback(released[keep][1])
            del released[keep:]
        for other in chosen[keep:at]:
            released.append((other, state.mark()))
            state.release(other.workload)
        trial = state.mark()
        for other in chosen[at + 1 :]:
            state.release(other.workload)
        dropped = fits()
        state.rollback(trial)
        if dropped:
            chosen = [c for c in chosen if c is not candidate]
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

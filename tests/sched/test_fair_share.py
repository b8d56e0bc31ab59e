"""Fair share: deserved first, then the unused capacity by over-quota weight, like water."""

from __future__ import annotations

import math

import pytest

from ringleader.sched.quota import Claim, water_fill


def claim(deserved: float, weight: float = 1, demand: float = 100, limit: float = math.inf):
    return Claim(deserved=deserved, limit=limit, weight=weight, demand=demand)


@pytest.mark.parametrize(
    ("weights", "expected"), [((1, 1), [5, 3]), ((3, 1), [6, 2]), ((1, 0), [7, 1])]
)
def test_unused_capacity_goes_by_weight(weights, expected) -> None:
    shares = water_fill(8, [claim(3, weights[0]), claim(1, weights[1])])
    assert shares == pytest.approx(expected)


def test_a_project_that_wants_less_gives_the_rest_back() -> None:
    assert water_fill(8, [claim(3), claim(1, demand=2)]) == pytest.approx([6, 2])
    assert water_fill(8, [claim(3, demand=1), claim(1)]) == pytest.approx([1, 7])


def test_no_share_passes_a_limit() -> None:
    assert water_fill(8, [claim(3, limit=4), claim(1)]) == pytest.approx([4, 4])


def test_oversubscribed_deserved_quotas_are_kept_and_nothing_is_shared() -> None:
    assert water_fill(4, [claim(3), claim(3)]) == pytest.approx([3, 3])


def test_unmanaged_resource_has_no_fair_share_cap() -> None:
    shares = water_fill(8, [claim(math.inf, demand=2), claim(1)])
    assert shares[0] == math.inf and shares[1] == pytest.approx(6)

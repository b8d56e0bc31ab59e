"""The bandwidth test's arithmetic: sizes as users write them, and 2(N-1)K/N."""

from __future__ import annotations

import pytest

from ringleader.cluster.busbw import moved, parse_size


def test_sizes_read_with_binary_units() -> None:
    assert [parse_size(s) for s in ("64", "4K", "1m", "256MiB", "1G")] == [
        64, 4096, 2**20, 256 * 2**20, 2**30
    ]  # fmt: skip
    for bad in ("", "M", "2X", "3", "-1K", "1.5M"):
        with pytest.raises(ValueError, match="at least 4 bytes"):
            parse_size(bad)


def test_each_rank_moves_two_n_minus_one_over_n_of_the_tensor() -> None:
    assert moved(3 * 2**20, 3) == 4 * 2**20
    assert moved(2**20, 2) == 2**20
    assert moved(2**20, 1) == 0

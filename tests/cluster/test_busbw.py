"""The bandwidth test's arithmetic: sizes as users write them, and 2(N-1)K/N."""

from __future__ import annotations

import pytest

from ringleader.cluster.busbw import duration_text, moved, parse_size, rate_text


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


def test_rates_and_times_are_shown_in_the_unit_that_shows_the_figure() -> None:
    """A 4 KiB allreduce's 1.34 MB/s is never ``0.001 GB/s``; three digits each."""
    rates = (0.3, 999.7, 406_056, 1_340_500, 12_345_678, 999.7e6, 1.332e9, 25e9)
    assert [rate_text(r) for r in rates] == [
        "0.30 B/s", "1.00 KB/s", "406 KB/s", "1.34 MB/s", "12.3 MB/s", "1.00 GB/s",
        "1.33 GB/s", "25.0 GB/s",
    ]  # fmt: skip
    times = (5e-5, 0.00336, 0.2895, 0.9999, 1.5)
    assert [duration_text(t) for t in times] == ["50.0 µs", "3.36 ms", "290 ms", "1.00 s", "1.50 s"]

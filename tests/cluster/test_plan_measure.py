"""``planner.measure.measure_link``: which hosts each measurement runs on, and how
its figures become the link's (the doctor's test itself is run for real in
``test_plan_cli.py``'s multihost test; here it is a stand-in that records calls)."""

from __future__ import annotations

from typing import Any

import pytest

from ringleader.cluster import busbw
from ringleader.errors import InvalidSpec
from ringleader.planner import measure


def test_widths_are_powers_of_two_and_the_whole() -> None:
    assert measure.widths(1) == []
    assert measure.widths(2) == [2]
    assert measure.widths(5) == [2, 4, 5]
    assert measure.widths(8) == [2, 4, 8]
    assert measure.widths(20) == [2, 4, 8, 16, 20]


def test_pairs_set_the_bandwidth_and_each_width_its_hop(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[list[str], list[str]]] = []

    def run_across(hosts: list[tuple[str, str]], sizes: list[str], *_: Any) -> Any:
        calls.append(([h[0] for h in hosts], sizes))
        width = len(hosts)
        slow = 3 if [h[0] for h in hosts] == ["h3", "h4"] else 1  # one slow pair
        rows = [{"seconds": 0.002 * width * (width - 1) * slow, "busbw": 1e8 / width}]
        return busbw.Outcome(rows if len(sizes) == 1 else [rows[0], {"busbw": 1e8}])

    monkeypatch.setattr(busbw, "run_across", run_across)
    hosts = [(f"h{i}", f"10.0.0.{i}") for i in range(5)]
    link = measure.measure_link(hosts)
    pairs = [c for c in calls if len(c[1]) == 2]
    assert [c[0] for c in pairs] == [["h0", "h1"], ["h1", "h2"], ["h2", "h3"], ["h3", "h4"],
                                     ["h4", "h0"]]  # fmt: skip
    wide = [c for c in calls if len(c[1]) == 1]
    assert wide == [(["h0", "h1", "h2", "h3"], ["4K"]), (["h0", "h1", "h2", "h3", "h4"], ["4K"])]
    # a pair's 4K all-reduce took 4 ms (h3-h4: 12 ms): 2 ms a hop, the first pair's is
    # width 2's (the hosts 2 ranks run on), the slowest (6 ms) the ring's default;
    # width w: 0.002 w(w-1) / 2(w-1) = w ms
    assert link.latency_s == pytest.approx(0.006)
    assert [n for n, _ in link.hops] == [2, 4, 5]
    assert [t for _, t in link.hops] == pytest.approx([0.002, 0.004, 0.005])


def test_a_failed_width_names_the_hostfile(monkeypatch: pytest.MonkeyPatch) -> None:
    def run_across(hosts: list[tuple[str, str]], sizes: list[str], *_: Any) -> Any:
        if len(hosts) > 2:
            return busbw.Outcome(error="rank 3 could not connect")
        return busbw.Outcome([{"seconds": 0.004}, {"busbw": 1e8}])

    monkeypatch.setattr(busbw, "run_across", run_across)
    with pytest.raises(InvalidSpec, match="first 3 hosts failed: rank 3") as found:
        measure.measure_link([(f"h{i}", f"10.0.0.{i}") for i in range(3)])
    assert found.value.where == "--hostfile"


def test_a_modes_step_runs_torchs_hook_on_a_world_of_one_and_leaves_no_group() -> None:
    import torch
    import torch.distributed as dist

    from ringleader.runtime.modes import make_mode

    def model() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                   torch.nn.Linear(256, 4))  # fmt: skip

    exact = measure.mode_step_s(model(), 8, make_mode(None), steps=3)
    compressed = measure.mode_step_s(model(), 8, make_mode("powersgd:2"), steps=3)
    assert exact > 0 and compressed > 0
    assert not dist.is_initialized()  # each call's group is gone: a second one can start

"""The scaling planner's arithmetic against cases worked by hand (docs/planning.md).

Why by hand: the planner's every figure follows from a few lines of arithmetic
(buckets, ring all-reduce, the overlap with backward); a case worked on paper
pins each of them, so a changed formula shows here as a changed number.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from ringleader.planner import units
from ringleader.planner.model import (
    MIB,
    Inputs,
    allreduce_s,
    bucket_sizes,
    contention,
    hop_latency,
    knee,
    predict,
    predict_all,
    ranks_shown,
    recommend,
    to_json,
    with_bytes_factor,
)

# 1M fp32 parameters: K = 4,000,000 bytes = a 1 MiB bucket then 2,951,424 bytes.
JOB = Inputs(
    params=1_000_000, dtype_bytes=4, forward_s=0.01, backward_s=0.02, other_s=0.0,
    busbw=1e8, latency_s=0.0, batch_size=32,
)  # fmt: skip


def test_buckets_are_ddps_first_1_mib_then_25_mib_each() -> None:
    assert bucket_sizes(4e6) == [MIB, 4e6 - MIB]
    assert bucket_sizes(60 * MIB) == [MIB, 25 * MIB, 25 * MIB, 9 * MIB]
    assert bucket_sizes(0.5 * MIB) == [0.5 * MIB]
    assert bucket_sizes(0) == []


def test_ring_allreduce_sends_2_n_minus_1_over_n_and_waits_2_n_minus_1_hops() -> None:
    assert allreduce_s(1e6, 1, 1e6, 1e-3) == 0
    assert allreduce_s(1e6, 2, 1e6, 0) == pytest.approx(1.0)  # 2(1)/2 = 1
    assert allreduce_s(1e6, 4, 1e6, 1e-3) == pytest.approx(1.5 + 0.006)  # 2(3)/4; 6 hops
    assert allreduce_s(1e6, 8, 1e6, 0) == pytest.approx(1.75)


def test_a_communication_bound_step_worked_by_hand() -> None:
    """N=2, 100 MB/s: bucket 1 (1 MiB) is ready at 10 + 20 x 1048576/4e6 = 15.24288 ms,
    takes 10.48576 ms (to 25.72864 ms); bucket 2 is ready when backward ends (30 ms) and
    takes 29.51424 ms: the step ends at 59.51424 ms, waiting 29.51424 ms on the link."""
    p = predict(JOB, 2)
    assert p.step_s == pytest.approx(0.05951424)
    assert p.comm_s == pytest.approx(0.04)  # K / busbw: 2(N-1)/N = 1
    assert p.exposed_s == pytest.approx(0.02951424)
    assert p.efficiency == pytest.approx(0.03 / 0.05951424)
    assert p.samples_per_s == pytest.approx(2 * 32 / 0.05951424)
    assert p.bound == "communication"  # 40 ms of link time, 20 ms of backward to hide it


def test_a_compute_bound_step_hides_all_but_the_last_bucket() -> None:
    """10 GB/s, 0.1 ms a hop: the last bucket (2,951,424 B) starts at 30 ms and takes
    0.2951424 ms + 2 hops x 0.1 ms; the optimizer's 5 ms follows."""
    fast = Inputs(**{**vars(JOB), "busbw": 1e10, "latency_s": 1e-4, "other_s": 0.005})
    p = predict(fast, 2)
    assert p.step_s == pytest.approx(0.03 + 0.0002951424 + 0.0002 + 0.005)
    assert p.comm_s == pytest.approx(4e-4 + 4e-4)  # bytes, and 2 hops per bucket
    assert p.bound == "compute"
    assert predict(fast, 1).step_s == pytest.approx(0.035)  # one rank: no all-reduce


def test_four_ranks_one_small_bucket_and_latency() -> None:
    """400 kB (one bucket) at 1 MB/s on 4 ranks: 1.5 x 0.4 s + 6 hops x 1 ms = 0.606 s
    from the end of backward (30 ms), then 5 ms of optimizer: 0.641 s."""
    small = Inputs(**{**vars(JOB), "params": 100_000, "busbw": 1e6, "latency_s": 1e-3,
                      "other_s": 0.005})  # fmt: skip
    p = predict(small, 4)
    assert p.step_s == pytest.approx(0.641)
    assert p.efficiency == pytest.approx(0.035 / 0.641)
    assert p.speedup == pytest.approx(4 * 0.035 / 0.641)


def test_the_knee_is_the_first_n_below_the_threshold_and_says_why() -> None:
    slow = predict_all(JOB, range(1, 5))
    found = knee(slow, JOB, 0.8)
    assert found.ranks == 2 and "communication-bound" in found.why
    assert "each rank sends 4 MB a step" in found.why and "40 ms on the link" in found.why
    fast = Inputs(**{**vars(JOB), "busbw": 1e11})
    found = knee(predict_all(fast, range(1, 9)), fast, 0.8)
    assert found.ranks is None and "no knee up to 8 ranks" in found.why
    assert "compute-bound" in found.why
    # between: efficiency falls below 90% at some N although compute bounds it
    mid = Inputs(**{**vars(JOB), "busbw": 1e9, "latency_s": 2e-4})
    found = knee(predict_all(mid, range(1, 9)), mid, 0.9)
    assert found.ranks == 2 and "compute-bound, but the last bucket" in found.why


def test_a_compression_factor_shrinks_the_bytes_and_is_recommended_when_comm_bound() -> None:
    half = with_bytes_factor(JOB, 0.5)
    assert half.grad_bytes == 2e6 and predict(half, 2).comm_s == pytest.approx(0.02)
    jobs = {"bf16": half, "powersgd:4": with_bytes_factor(JOB, 0.05)}
    chosen = recommend(JOB, 2, jobs)
    assert chosen is not None and chosen[0] == "powersgd:4"
    assert chosen[1].samples_per_s > predict(JOB, 2).samples_per_s
    # a mode whose own cost outweighs the bytes saved is not recommended
    assert recommend(JOB, 2, {"bf16": replace(half, other_s=1.0)}) is None
    fast = replace(JOB, busbw=1e11)
    assert recommend(fast, 2, {"bf16": with_bytes_factor(fast, 0.5)}) is None  # compute-bound
    with pytest.raises(ValueError, match="bytes factor"):
        with_bytes_factor(JOB, 0)


def test_json_and_shown_rows() -> None:
    body = to_json(JOB, predict_all(JOB, [1, 2]), knee(predict_all(JOB, [1, 2]), JOB))
    assert body["inputs"]["grad_bytes"] == 4e6 and body["inputs"]["compute_s"] == 0.03
    assert [p["ranks"] for p in body["predictions"]] == [1, 2] and body["knee"]["ranks"] == 2
    assert ranks_shown(4) == [1, 2, 3, 4]
    assert ranks_shown(100) == [*range(1, 17), 32, 64, 100]
    with pytest.raises(ValueError, match="at least 1"):
        predict(JOB, 0)


def test_units_as_users_write_them() -> None:
    assert [units.parse_count(t) for t in ("25M", "1.5B", "350000", "7k", "2G")] == [
        25_000_000, 1_500_000_000, 350_000, 7_000, 2_000_000_000
    ]  # fmt: skip
    assert [units.parse_duration(t) for t in ("120ms", "1.5s", "50us", "50µs")] == [
        pytest.approx(0.12), 1.5, pytest.approx(5e-5), pytest.approx(5e-5)
    ]  # fmt: skip
    assert units.parse_shape("3,32,32") == (3, 32, 32)
    for parse, bad in ((units.parse_count, "25X"), (units.parse_count, "0"),
                       (units.parse_duration, "120"), (units.parse_duration, "fast"),
                       (units.parse_shape, "3,0"), (units.parse_shape, "a,b")):  # fmt: skip
        with pytest.raises(ValueError, match=r"is not|at least"):
            parse(bad)


def test_ranks_sharing_a_machines_cores_compute_slower_worked_by_hand() -> None:
    """8 one-thread ranks on 2 shared cores: each computes 4x slower (40 ms of
    forward, 80 of backward); 2 ranks fit the cores and compute at full speed. The
    link is fast (1e12 B/s): the step is the stretched compute, so the job is
    compute-bound and 8 ranks give 8 x 32 / 0.12 samples/s: no more than 2 ranks
    (the cores, not the ranks, do the work)."""
    fast = replace(JOB, busbw=1e12, shared_cores=2, threads=1)
    assert contention(fast, 1) == contention(fast, 2) == 1.0
    assert contention(fast, 3) == pytest.approx(1.5)
    assert contention(fast, 8) == pytest.approx(4.0)
    assert contention(replace(fast, threads=2), 2) == pytest.approx(2.0)
    assert contention(JOB, 64) == 1.0  # no shared_cores: a machine per rank
    two, eight = predict(fast, 2), predict(fast, 8)
    assert two.step_s == pytest.approx(0.03, rel=1e-3)
    assert eight.step_s == pytest.approx(0.12, rel=1e-3)
    assert eight.compute_s == pytest.approx(0.12)
    assert eight.samples_per_s == pytest.approx(two.samples_per_s, rel=1e-3)
    assert eight.bound == "compute"
    every = predict_all(fast, range(1, 9))  # efficiency against one rank alone
    assert every[-1].efficiency == pytest.approx(0.25, rel=1e-3)
    found = knee(every, fast)
    assert found.ranks == 3  # 1.5x slower: efficiency 67%
    assert "share 2 cores" in found.why and "1.5x slower" in found.why


def test_sharing_cores_lengthens_the_backward_that_hides_the_link() -> None:
    """The 1M-parameter job on 4 ranks sharing 2 cores: backward takes 40 ms, so the
    second bucket (29.51424 ms x 1.5 = 44.27136 ms of 2(N-1)/N) starts when it ends
    at 60 ms: the step is 104.27136 ms (+ 6 hops of 0 latency)."""
    shared = replace(JOB, shared_cores=2, threads=1)
    p = predict(shared, 4)
    assert p.compute_s == pytest.approx(0.06)
    assert p.step_s == pytest.approx(0.06 + 1.5 * (4e6 - MIB) / 1e8)


def test_a_hop_is_taken_at_its_width_linear_between_measured_ones() -> None:
    job = replace(JOB, latency_s=1e-4, hop_latencies=((2, 1e-3), (4, 2e-3), (8, 4e-3)))
    assert hop_latency(job, 2) == pytest.approx(1e-3)
    assert hop_latency(job, 3) == pytest.approx(1.5e-3)
    assert hop_latency(job, 6) == pytest.approx(3e-3)
    assert hop_latency(job, 16) == pytest.approx(4e-3)  # beyond: the widest measured
    assert hop_latency(JOB, 8) == JOB.latency_s  # none measured: --latency's
    # N=3 pays 2(N-1) = 4 hops of 1.5 ms a bucket on top of its bytes
    p = predict(replace(job, busbw=1e12), 3)
    assert p.comm_s == pytest.approx(2 * 4 * 1.5e-3, rel=1e-3)


def test_powersgd_like_collectives_after_backward_worked_by_hand() -> None:
    """The 1M-parameter job, factor 0.01, 3 all-reduces a bucket, no overlap, 1 ms a
    hop, N=2: buckets cut from the uncompressed 4 MB (1 MiB, then 2,951,424 bytes),
    each sent as 1% of it after backward (30 ms): bucket 1 takes 10485.76/1e8 s of
    bytes + 3 x 2 hops = 6.10486 ms, bucket 2 6.29514 ms: the step is 42.4 ms."""
    job = replace(with_bytes_factor(JOB, 0.01), latency_s=1e-3, collectives=3, overlap=False)
    p = predict(job, 2)
    assert p.comm_s == pytest.approx(0.0004 + 0.012)
    assert p.step_s == pytest.approx(0.03 + 0.0124)
    assert p.bound == "compute"  # 12.4 ms of link beside 30 ms of compute
    overlapped = predict(replace(job, overlap=True), 2)
    assert overlapped.step_s < p.step_s  # bucket 1 would go while backward runs

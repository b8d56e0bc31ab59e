"""The planner's communication modes against factors worked by hand, and ``plan``'s
recommendation and ``--grad-compression``/``--sync-every`` as a user runs them.

Why by hand: a mode's prediction is the exact one with fewer bytes (or, for local
SGD, one all-reduce every H steps); the factor is the whole difference, so each is
pinned on a model whose tensor shapes are known.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ringleader.planner import modes as planned
from ringleader.planner.model import Inputs, allreduce_s, predict, predict_all
from ringleader.runtime.modes import make_mode
from tests.helpers.plan_cli import plan

# models.py's mlp (test_plan_cli.MODELS): Linear(64, 128), Linear(128, 10)
MLP = [(128, 64), (128,), (10, 128), (10,)]
JOB = Inputs(
    params=1_000_000, dtype_bytes=4, forward_s=0.01, backward_s=0.02, other_s=0.0,
    busbw=1e8, latency_s=0.0, batch_size=32,
)  # fmt: skip


def test_powersgd_sends_r_n_plus_m_per_matrix_and_biases_whole() -> None:
    """Rank 4: 128x64 -> 4 x (128 + 64) = 768 (768 x 2 < 8192: compressed); 10x128 ->
    4 x 138 = 552 (1104 < 1280: compressed); biases 128 and 10 whole: 1458 of 9610."""
    assert planned.powersgd_elements(MLP, 4) == (768 + 128 + 552 + 10, 9610)
    # rank 8: 10x128 -> 8 x 138 = 1104, 2208 > 1280: not worth it, sent whole
    assert planned.powersgd_elements(MLP, 8) == (8 * 192 + 128 + 1280 + 10, 9610)
    # a conv kernel 16x3x3x3 is the matrix 16 x 27; rank 2: 2 x 43 = 86 (172 < 432)
    assert planned.powersgd_elements([(16, 3, 3, 3)], 2) == (86, 432)
    # r = min(n, m, R): a 3 x 1000 matrix at rank 8 sends 3 x 1003, not worth it
    assert planned.powersgd_elements([(3, 1000)], 8) == (3000, 3000)
    found = planned.cost(make_mode("powersgd:4"), 4, MLP)
    assert found.bytes_factor == pytest.approx(1458 / 9610)
    assert "4 tensors: 1,458 of 9,610 elements" in found.note


def test_without_shapes_powersgd_assumes_square_1024_matrices_and_says_so() -> None:
    found = planned.cost(make_mode("powersgd:4"), 4, None)
    assert found.bytes_factor == pytest.approx(4 * 2048 / 1024**2)  # 1/128
    assert "assumed: 1024x1024" in found.note and "lossy" in found.caveat


def test_half_precision_halves_fp32_and_leaves_half_alone() -> None:
    assert planned.cost(make_mode("bf16"), 4, MLP).bytes_factor == 0.5
    assert planned.cost(make_mode("fp16"), 8, None).bytes_factor == 0.25
    assert planned.cost(make_mode("bf16"), 2, None).bytes_factor == 1.0


def test_local_sgd_pays_one_unhidden_allreduce_every_h_steps() -> None:
    """H = 4, N = 2, 100 MB/s: 4 MB once every 4 steps = 40 ms / 4 = 10 ms a step on
    top of the 30 ms of compute (averaging runs after the optimizer: nothing hides it)."""
    found = planned.cost(make_mode(None, 4), 4, None)
    job = planned.apply(JOB, found)
    p = predict(job, 2)
    assert p.comm_s == pytest.approx(0.01) and p.step_s == pytest.approx(0.04)
    assert predict(job, 4).step_s == pytest.approx(0.03 + allreduce_s(4e6, 4, 1e8, 0) / 4)
    assert predict(job, 1).step_s == pytest.approx(0.03)
    assert "ranks drift apart" in found.caveat and found.name == "--sync-every 4"


def test_a_modes_own_compute_is_added_to_the_step() -> None:
    found = planned.cost(make_mode("powersgd:4"), 4, MLP, extra_compute_s=0.005)
    job = planned.apply(JOB, found)
    assert job.other_s == 0.005 and job.grad_bytes == pytest.approx(4e6 * 1458 / 9610)


def test_advice_only_for_a_communication_bound_job() -> None:
    costs = [planned.cost(make_mode(w), 4, None) for w in planned.RECOMMENDED]
    slow = predict_all(JOB, range(1, 5))
    advice = planned.advise(JOB, slow, 2, costs)
    assert advice is not None and advice["flag"] == "--grad-compression powersgd:4"
    exact2 = predict(JOB, 2)
    assert advice["ranks"] == 2 and advice["exact_samples_per_s"] == exact2.samples_per_s
    # 4e6/128 = 31,250 bytes, one bucket ready at 30 ms, 0.3125 ms on the link
    assert advice["samples_per_s"] == pytest.approx(64 / 0.0303125)
    assert advice["gain"] == pytest.approx(0.05951424 / 0.0303125)
    assert "communication-bound at N=2: try --grad-compression powersgd:4" in (
        planned.advice_text(advice)
    )
    fast = Inputs(**{**vars(JOB), "busbw": 1e11})
    assert planned.advise(fast, predict_all(fast, range(1, 9)), None, costs) is None


def test_plan_recommends_a_mode_only_when_communication_bound(tmp_path: Path) -> None:
    slow = plan(tmp_path, "--params", "25M", "--step-time", "120ms", "--link", "1gbit",
                "--max-ranks", "4")  # fmt: skip
    assert slow.returncode == 0, slow.stderr
    text = " ".join(slow.stdout.split())
    assert "communication-bound at N=2: try --grad-compression powersgd:4" in text
    assert all(len(line) <= 80 for line in slow.stdout.splitlines()), slow.stdout
    fast = plan(tmp_path, "--params", "1M", "--step-time", "120ms", "--link", "100gbit",
                "--max-ranks", "4", "--json")  # fmt: skip
    assert fast.returncode == 0, fast.stderr
    assert json.loads(fast.stdout)["recommendation"] is None


def test_plan_predicts_a_given_mode_from_the_models_shapes(tmp_path: Path) -> None:
    exact = plan(tmp_path, "--model", "models:mlp", "--step-time", "30ms", "--link",
                 "1mbit", "--max-ranks", "2", "--json")  # fmt: skip
    assert exact.returncode == 0, exact.stderr
    body = json.loads(exact.stdout)
    advice = body["recommendation"]  # powersgd's own compute, timed, may cost more here
    factors = {"--grad-compression powersgd:4": 1458 / 9610, "--grad-compression bf16": 0.5}
    assert advice["bytes_factor"] == pytest.approx(factors[advice["flag"]])
    done = plan(tmp_path, "--model", "models:mlp", "--step-time", "30ms", "--link", "1mbit",
                "--max-ranks", "2", "--grad-compression", "powersgd:4", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["inputs"]["bytes_factor"] == pytest.approx(1458 / 9610)
    assert got["source"]["mode"]["mode"] == "--grad-compression powersgd:4"
    # PowerSGD's own compute (its step timed under the hook, less the plain step: both
    # timed here, so a loaded machine may make it 0) is what the step adds
    extra = got["source"]["mode"]["extra_compute_s"]
    assert extra >= 0 and got["inputs"]["other_s"] == pytest.approx(extra)
    assert got["predictions"][1]["comm_s"] < body["predictions"][1]["comm_s"] / 5
    local = plan(tmp_path, "--params", "1M", "--step-time", "30ms", "--link", "800mbit",
                 "--max-ranks", "2", "--sync-every", "4", "--json")  # fmt: skip
    assert local.returncode == 0, local.stderr
    assert json.loads(local.stdout)["inputs"]["sync_every"] == 4


@pytest.mark.parametrize(
    ("args", "flag", "says"),
    [
        (["--grad-compression", "zip"], "--grad-compression", "powersgd[:RANK]"),
        (["--grad-compression", "powersgd:0"], "--grad-compression", "from 1 to 256"),
        (["--sync-every", "0"], "--sync-every", "from 1 to"),
        (["--sync-every", "4", "--grad-compression", "bf16"], "--sync-every", "choose one"),
    ],
)
def test_a_bad_mode_exits_2_naming_the_flag(
    tmp_path: Path, args: list[str], flag: str, says: str
) -> None:
    done = plan(tmp_path, "--params", "1M", "--step-time", "1s", "--link", "1gbit", *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert flag in done.stderr and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_powersgd_pays_three_all_reduces_a_bucket_after_backward() -> None:
    found = planned.cost(make_mode("powersgd:4"), 4, [(1000, 1000)], 0.0)
    job = planned.apply(JOB, found)
    assert job.collectives == planned.POWERSGD_COLLECTIVES == 3 and job.overlap is False
    for word in ("bf16", "fp16"):  # one all-reduce a bucket, overlapping backward
        other = planned.apply(JOB, planned.cost(make_mode(word), 4, None))
        assert other.collectives == 1 and other.overlap is True
